"""Nothing outlives a command, however it is stopped: ``crash-test``, ``soak``, ``grade`` and ``grade-batch`` are
each stopped mid-run by SIGINT (Ctrl-C), SIGTERM (a CI runner's cancel) and SIGKILL, sent to the command's own
process. Afterwards no process of its tree is left and its temporary folder (TMPDIR, a fresh one per test, so the
check is exact) is empty -- after SIGKILL, which runs none of its cleanup, once the next command has swept it
(``sweep_scratch``, which every command's entry calls: ``tests/plumbing/test_scratch.py``).

The processes checked are the ones the command started, read from /proc while it ran: every descendant, and
whatever joined its session, each by pid and start time (a pid the system gives to another process later is not
taken for one of them). Each command is stopped mid-run: an agent that hangs after its first model call; a
grading while the student's notebook runs in its kernel, or (Ctrl-C of ``grade``, and SIGKILL of an isolated
``grade``) while the judge, a subprocess of the grader, waits on the student's code in a subprocess of its own.
The demo is left out: it cannot be started for less than the servers of every engine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

import tiny_course
from crashlab.plumbing.process_tree import start_time, stat_fields
from crashlab.plumbing.scratch import remove_scratch, sweep_scratch

HANG = Path(__file__).parents[1] / "agents" / "hang_agent.py"
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
HANGING_ANSWER = "%%writefile tiny.py\ndef double(x):\n    import time\n    time.sleep(3600)\n"


def hanging_course(root: Path) -> tuple[Path, Path]:
    """The tiny course, and a submission whose exercise 1 never returns: the judge's check waits on it."""
    solutions = tiny_course.write_course(root)
    nb = tiny_course.master()
    nb.cells[1].source = HANGING_ANSWER
    (root / "subs" / "ann").mkdir(parents=True)
    nbformat.write(nb, root / "subs" / "ann" / tiny_course.NAME)
    return solutions, root / "subs" / "ann" / tiny_course.NAME


def agent_forked(cmdlines: list[str]) -> bool:
    """The warm launcher and at least one agent forked from it (which keeps the launcher's command line)."""
    return sum("crashlab.harness.launcher" in line for line in cmdlines) >= 2


def notebook_running(cmdlines: list[str]) -> bool:
    return any("ipykernel_launcher" in line for line in cmdlines)


def judging(cmdlines: list[str]) -> bool:
    """The judge runs a check, and the check waits on the student's code in its subject process."""
    return any("crashlab.grading.subject" in line for line in cmdlines)


def command(name: str, root: Path, isolate: bool = False, judge: bool = False) -> tuple[list[str], callable]:
    isolation = [] if isolate else ["--no-isolate"]
    if name == "crash-test":
        return ["crash-test", str(HANG), "--points", "after:charge_card", "--timeout", "3600", "--jobs", "1"], \
            agent_forked
    if name == "soak":
        return ["soak", str(HANG), "--orders", "1", "--kill-window", "1", "--timeout", "3600", "--jobs", "1"], \
            agent_forked
    solutions, submission = hanging_course(root)
    if name == "grade":
        return ["grade", str(submission), "--timeout", "1", *isolation], judging if judge else notebook_running
    return ["grade-batch", str(submission.parents[1]), "--solutions", str(solutions), "--results-dir",
            str(root / "results"), "--timeout", "1", "--quiet", *isolation], notebook_running


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tree(root: int) -> set[int]:
    """Every live process below ``root``, and every one in its session."""
    table = {}
    for entry in os.listdir("/proc"):
        try:
            fields = stat_fields(int(entry)) if entry.isdigit() else None
        except OSError:
            continue
        if fields and fields[0] != b"Z":
            table[int(entry)] = (int(fields[1]), int(fields[3]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found | {pid for pid, (_, sid) in table.items() if sid == root and pid != root}


def still_running(seen: dict[int, int | None]) -> list[int]:
    return [pid for pid, started in seen.items() if started is not None and start_time(pid) == started]


@pytest.fixture
def private_tmp():
    """A fresh temporary folder for the command, traversable by a sandbox user as /tmp is (an isolated grading's
    student runs in a folder made there)."""
    folder = Path(tempfile.mkdtemp(prefix="crashlab-test-tmpdir-"))
    os.chmod(folder, 0o1777)
    yield folder
    remove_scratch(folder)


def interrupt(argv: list[str], ready, sig: int, cwd: Path, tmp: Path) -> tuple[subprocess.Popen, str, list[int]]:
    """Run ``crashlab ARGV`` until ``ready(command lines of its tree)``, send ``sig`` to its own process, and
    wait for it; returns the process, its stderr, and the processes of its tree still running 30 s after."""
    env = {**os.environ, "TMPDIR": str(tmp), "CRASHLAB_ROOT": str(cwd)}
    err_file = cwd / "stderr.txt"
    with open(err_file, "w") as err:
        # SIGINT as a terminal's Ctrl-C finds it: a suite started in the background by a shell without job control
        # (`make test &`) hands every process an ignored SIGINT, and Python keeps it ignored.
        process = subprocess.Popen([sys.executable, "-m", "crashlab.cli", *argv], cwd=cwd, env=env, stdout=err,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen: dict[int, int | None] = {}
    try:
        deadline = time.monotonic() + 240
        while process.poll() is None and time.monotonic() < deadline:
            for pid in tree(process.pid):
                seen.setdefault(pid, start_time(pid))
            if ready([cmdline(pid) for pid in still_running(seen)]):
                break
            time.sleep(0.25)
        assert process.poll() is None, f"it ended before it was interrupted: {err_file.read_text()[-800:]}"
        assert ready([cmdline(pid) for pid in still_running(seen)]), "never got under way"
        process.send_signal(sig)
        while process.poll() is None and time.monotonic() < deadline + 120:
            for pid in tree(process.pid):
                seen.setdefault(pid, start_time(pid))
            time.sleep(0.25)
        settle = time.monotonic() + 30  # a killed command's children notice their parent is gone within a poll
        while still_running(seen) and time.monotonic() < settle:
            time.sleep(0.1)
        left = [f"{pid} {cmdline(pid)}" for pid in still_running(seen)]
    finally:
        for pid in still_running(seen) + ([process.pid] if process.poll() is None else []):
            try:
                os.kill(pid, signal.SIGKILL)  # a failing run must not leave them to the next test
            except ProcessLookupError:
                pass
        process.wait()
    return process, err_file.read_text(), left


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("name", ["crash-test", "soak", "grade", "grade-batch"])
def test_an_interrupted_command_leaves_no_process_and_no_scratch_folder(name, sig, tmp_path, private_tmp):
    argv, ready = command(name, tmp_path, judge=sig == "SIGINT")
    process, said, left = interrupt(argv, ready, SIGNALS[sig], tmp_path, private_tmp)
    assert left == [], f"{name} stopped by {sig} left these running: {left}"
    if sig == "SIGKILL":
        assert process.returncode == -signal.SIGKILL
        sweep_scratch(private_tmp)  # what the next command does first
    else:
        assert process.returncode == 130, said[-800:]
        assert "Traceback" not in said, said[-800:]
    assert sorted(p.name for p in private_tmp.iterdir()) == [], f"{name} stopped by {sig} left scratch folders"


@pytest.mark.skipif(os.geteuid() != 0, reason="grading isolates the student's code only when run as root")
def test_an_isolated_grading_killed_by_sigkill_takes_its_judge_and_the_students_code_along(tmp_path, private_tmp):
    """The judge changes its file user (setfsuid), which clears a parent-death signal: it watches its parent."""
    argv, ready = command("grade", tmp_path, isolate=True, judge=True)
    process, said, left = interrupt(argv, ready, signal.SIGKILL, tmp_path, private_tmp)
    assert left == [], f"left running: {left}"
    sweep_scratch(private_tmp)  # the grading's folder, handed to the sandbox user, included
    assert sorted(p.name for p in private_tmp.iterdir()) == []
