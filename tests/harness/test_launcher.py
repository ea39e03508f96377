"""The warm launcher, concurrent resumers, double crashes and lost acknowledgements in the harness."""

import os
from pathlib import Path

import pytest

from crashlab.harness import crash_row, crash_test, double_crash_pairs, run_agent
from crashlab.harness.launcher import LauncherError, WarmLauncher
from crashlab.world import World

AGENTS = Path(__file__).parents[1] / "agents"


def test_warm_children_are_new_processes_killed_for_real(tmp_path, launcher):
    with World.start(tmp_path / "w") as world:
        first = run_agent(AGENTS / "naive_agent.py", world, crash_at="after:charge_card", launcher=launcher)
        second = run_agent(AGENTS / "naive_agent.py", world, launcher=launcher)
        assert first.killed and first.returncode == -9
        assert first.crashed_at == "after:charge_card"
        assert second.returncode == 0 and second.pid != first.pid
        audit = world.audit()
        assert audit.counts["charge"] == 2, "the naive agent repeats the charge: the crash was real"
        pids = {e.pid for e in audit.events}
        assert pids == {first.pid, second.pid}, "the world saw exactly the two child pids"


def test_a_warm_run_forks_from_the_kept_launcher_and_exec_starts_a_new_interpreter(tmp_path):
    """``"warm"`` (the default of run_agent, as of crash_row and crash_test) spares each run the SDK's import (1.3 s
    to 2 s of CPU): the agent's parent is the kept launcher, not this process; ``"exec"`` starts a new interpreter, a
    child of ours."""
    from crashlab.harness.launcher import kept_launcher

    script = tmp_path / "parent.py"
    script.write_text("import os, sys\nprint(os.getppid(), 'anthropic' in sys.modules)\n")
    with World.start(tmp_path / "w") as world:
        warm = run_agent(script, world)
        cold = run_agent(script, world, launcher="exec")
        with pytest.raises(ValueError, match="'warm', 'exec'"):
            run_agent(script, world, launcher="lukewarm")
    assert warm.returncode == cold.returncode == 0, (warm.stderr, cold.stderr)
    warm_parent, warm_sdk = warm.stdout.split()
    cold_parent, cold_sdk = cold.stdout.split()
    assert int(warm_parent) == kept_launcher().pid != os.getpid() and warm_sdk == "True"
    assert int(cold_parent) == os.getpid() and cold_sdk == "False"


def test_warm_child_reports_exit_codes_and_errors(tmp_path, launcher):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nprint('hello')\nraise SystemExit(3)\n")
    failing = tmp_path / "fails.py"
    failing.write_text("raise ValueError('boom')\n")
    with World.start(tmp_path / "w") as world:
        run = run_agent(script, world, launcher=launcher)
        assert run.returncode == 3 and run.stdout == "hello\n"
        run = run_agent(failing, world, launcher=launcher)
        assert run.returncode == 1 and "ValueError: boom" in run.stderr


def test_a_warm_child_has_the_default_sigchld_and_no_wakeup_pipe_and_its_own_children_run(tmp_path, launcher):
    """The launcher sleeps until SIGCHLD writes to its wakeup pipe; a child it forks must not keep either. With the
    launcher's handler an agent's own signals would write into a file descriptor that may by then be one of its files."""
    script = tmp_path / "signals.py"
    script.write_text("import signal, subprocess, sys\n"
                      "print(signal.getsignal(signal.SIGCHLD) is signal.SIG_DFL, signal.set_wakeup_fd(-1))\n"
                      "print(subprocess.run([sys.executable, '-c', 'print(7)'], capture_output=True, text=True).stdout)\n")
    with World.start(tmp_path / "w") as world:
        runs = [run_agent(script, world, launcher=launcher) for _ in range(3)]
    assert [(run.returncode, run.stdout.split()) for run in runs] == [(0, ["True", "-1", "7"])] * 3, runs[0].stderr


def test_warm_children_do_not_share_agent_state(tmp_path, launcher):
    """A module the agent imports is imported afresh in each child."""
    (tmp_path / "counter_mod.py").write_text("COUNT = []\n")
    script = tmp_path / "count.py"
    script.write_text("import counter_mod\ncounter_mod.COUNT.append(1)\nprint(len(counter_mod.COUNT))\n")
    with World.start(tmp_path / "w") as world:
        outputs = [run_agent(script, world, launcher=launcher).stdout for _ in range(3)]
    assert outputs == ["1\n"] * 3


def test_warm_launcher_hangs_are_killed(tmp_path, launcher):
    with World.start(tmp_path / "w") as world:
        run = run_agent(AGENTS / "hang_agent.py", world, timeout=2, launcher=launcher)
    assert run.timed_out and run.returncode == -9


def test_bad_preload_is_a_clear_error():
    with pytest.raises(LauncherError, match="no_such_module_here"):
        WarmLauncher(preload=("no_such_module_here",))


def test_the_kept_launcher_imports_another_engines_modules_instead_of_a_second_launcher(tmp_path):
    """A second preload is imported into the running launcher (the SDK is not imported again in a new one), and the
    agents forked after it find it imported; one it cannot import is a clear error, and the next crash test gets a
    launcher that works."""
    from crashlab.harness.launcher import kept_launcher

    script = tmp_path / "has.py"
    script.write_text("import os, sys\nprint(os.getppid(), 'email.mime.text' in sys.modules)\n")
    first = kept_launcher()
    assert kept_launcher(("email.mime.text",)) is first
    with World.start(tmp_path / "w") as world:
        run = run_agent(script, world)
    assert run.stdout.split() == [str(first.pid), "True"], run.stderr
    with pytest.raises(LauncherError, match="no_such_module_here"):
        kept_launcher(("no_such_module_here",))
    again = kept_launcher()
    assert again.alive() and "no_such_module_here" not in again.preload


def test_warm_and_exec_give_the_same_matrix(tmp_path):
    points = ["before:charge_card", "after:reserve_item", "after:model#4"]
    warm = crash_test(AGENTS / "naive_agent.py", points, expect="observe", progress=False, launcher="warm")
    cold = crash_test(AGENTS / "naive_agent.py", points, expect="observe", progress=False, launcher="exec")
    shape = lambda m: [(r.point, r.reached, r.duplicates, r.model_calls, r.repeated_model_calls, r.finished)
                       for r in m.rows]
    assert shape(warm) == shape(cold)
    assert warm.row("after:reserve_item").duplicates == 1


def test_concurrent_resumers_race_without_a_lock(tmp_path):
    """Three naive resumers at once after a crash: each repeats the pending step."""
    row = crash_row(AGENTS / "naive_agent.py", "after:charge_card", expect="durable", resumers=3,
                    workdir=tmp_path, launcher=None)
    assert len(row.runs) == 4
    assert row.effects["charge"] >= 2 and not row.ok


def test_double_crash_kills_the_resume_too(tmp_path):
    row = crash_row(AGENTS / "naive_agent.py", "after:charge_card", expect="observe",
                    then_crash_at="before:send_confirmation", workdir=tmp_path)
    assert row.point == "after:charge_card + before:send_confirmation"
    assert [r.killed for r in row.runs] == [True, True, False]
    assert row.finished and row.reached


def test_a_second_point_the_resume_never_reaches_is_a_failure(tmp_path):
    row = crash_row(AGENTS / "naive_agent.py", "after:send_confirmation", expect="observe",
                    then_crash_at="before:charge_card", workdir=tmp_path)
    assert not row.reached
    assert any("second crash point" in p and "never reached" in p for p in row.problems)


def test_double_crash_pairs_are_reachable_and_sampled():
    pairs = double_crash_pairs(None)
    order = ["charge_card", "reserve_item", "send_confirmation"]
    for first, second in pairs:
        tool = second.split(":")[1]
        first_op = first.split(":")[1]
        first_index = int(first_op.split("#")[1]) - 1 if first_op.startswith("model#") else order.index(first_op)
        assert order.index(tool) > first_index
    assert len(double_crash_pairs(4)) == 4 and set(double_crash_pairs(4)) <= set(pairs)


def test_lost_ack_fault_in_a_row(tmp_path):
    """Armed in the world before the run: the naive agent's charge fails on a lost reply and it stops."""
    row = crash_row(AGENTS / "naive_agent.py", "after:reserve_item", expect="durable",
                    faults=[("lost_ack:charge_card", 1, None)], workdir=tmp_path)
    assert not row.reached
    assert any("lost acknowledgement" in p for p in row.problems), row.problems
    assert row.effects["charge"] == 1


def test_the_sdk_warm_up_sends_nothing_to_the_world_and_starts_no_thread(tmp_path, monkeypatch):
    """The launcher does the SDK's first-call work before it forks (crashlab.agent.warm_up_sdk), against a canned
    reply in its own process: the world, whose URL the process knows, sees no request, and no thread is left to
    make forking unsafe (the launcher refuses to start then)."""
    import threading

    from crashlab.agent import warm_up_sdk

    with World.start(tmp_path / "w") as world:
        for key, value in world.env().items():
            monkeypatch.setenv(key, value)
        threads = threading.active_count()
        warm_up_sdk()
        assert threading.active_count() == threads
        assert world.audit().model_calls == 0


def test_crash_tests_keep_one_launcher_and_replace_a_dead_one():
    """crash_test(launcher="warm") forks from a launcher the process keeps for its later crash tests; one that died
    (killed with a grading's processes, say) is started again, and the next matrix runs as before."""
    import os
    import signal
    import time

    from crashlab.harness.launcher import kept_launcher

    kept = kept_launcher()
    first = crash_test(AGENTS / "naive_agent.py", ["after:charge_card"], expect="observe", baseline=False,
                       progress=False, preload=("json",))
    assert kept_launcher() is kept and kept.alive() and "json" in kept.preload
    assert first.rows[0].reached and first.rows[0].duplicates == 1, first
    os.kill(kept._process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while kept.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not kept.alive()
    again = crash_test(AGENTS / "naive_agent.py", ["after:charge_card"], expect="observe", baseline=False,
                       progress=False)
    assert again.rows[0].reached and again.rows[0].duplicates == 1, again
    assert kept_launcher() is not kept and kept_launcher().alive()


FORKED = """
import os, sys, tempfile
from crashlab.harness.launcher import fork_kept_launcher, kept_launcher
forked = fork_kept_launcher()
secret = open(sys.argv[1]).read()  # read after the fork, as the judge reads its job: no agent may hold it
launcher = kept_launcher()
probe = sys.argv[2]
run = launcher.spawn([probe], os.getcwd(), dict(os.environ, TMPDIR=sys.argv[3]), probe + ".out", probe + ".err")
code = run.wait(30)
print(forked, launcher.pid != os.getpid(), code, run.output()[0].strip(), run.output()[1][-300:].strip())
"""
PROBE = """
import gc, os, sys, tempfile
needle = "hidden-" + "expectation-42"  # made here: the source holds only its halves
held = any(r is not needle and isinstance(r, str) and needle in r for o in gc.get_objects() for r in gc.get_referents(o))
print(os.getppid(), tempfile.gettempdir(), held)
"""


def test_a_process_forked_from_a_launcher_forks_its_own_launcher_before_it_reads_anything_private(tmp_path):
    """The judge is forked from the grader's launcher with the SDK imported; its own launcher is then a fork of it,
    not a new interpreter that imports the SDK again. Made before the judge reads its job, it holds nothing of it;
    and the agents it forks choose their temporary folder from their own environment, not from a cached one."""
    (tmp_path / "forked_probe.py").write_text(FORKED)
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "job").write_text("hidden-expectation-" + "42")
    ours, theirs = tmp_path / "judge-tmp", tmp_path / "agent-tmp"
    ours.mkdir()
    theirs.mkdir()
    env = {**os.environ, "TMPDIR": str(ours)}
    with WarmLauncher(("crashlab.harness",)) as outer:
        process = outer.spawn([str(tmp_path / "forked_probe.py"), str(tmp_path / "job"), str(tmp_path / "probe.py"),
                               str(theirs)],
                              tmp_path, env, tmp_path / "out", tmp_path / "err")
        assert process.wait(60) == 0, process.output()
        fields = process.output()[0].split()
    assert fields[:3] == ["True", "True", "0"], fields
    parent, temp_dir, held = fields[3:6]
    assert int(parent) != process.pid and int(parent) != outer.pid, "the agent's parent is the forked launcher"
    assert temp_dir == str(theirs), "the agent's TMPDIR, not the one its launcher had cached"
    assert held == "False", "the forked launcher was made before the job was read"


@pytest.mark.parametrize("setup", ["", "import anthropic, httpx, crashlab.agent, threading, time\n"
                                       "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"],
                         ids=["without-the-sdk", "with-a-second-thread"])
def test_fork_kept_launcher_declines_where_forking_would_save_nothing_or_be_unsafe(setup):
    import subprocess
    import sys

    code = setup + "from crashlab.harness.launcher import fork_kept_launcher\nprint(fork_kept_launcher())\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
