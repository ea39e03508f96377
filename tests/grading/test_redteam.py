"""The red team: notebooks that try to score without solving, each graded for real.

Every cheat here starts from the unanswered student notebook of lesson 1 (honest score: 0) and adds
one attack. Each must score 0. The fair side -- the master at full marks, isolated and not -- is
checked here too. The attacks follow the threat model in the README ("How grading works").
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import crashlab
from crashlab.grading.grade import grade_notebook
from crashlab.course.notebooks import grade_id

ROOT = Path(__file__).resolve().parents[2]
LESSON1 = "01_naive_event_log.ipynb"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="isolation needs root (CI and .ci/run grade as root)")


def student_with(*cells: str, replace: dict | None = None, at_end: bool = False) -> nbformat.NotebookNode:
    """The student notebook of lesson 1 with extra cells right after its imports cell (or, ``at_end``,
    after everything, so what they write is not overwritten by the notebook's own cells), and answer
    cells replaced by ``replace`` (grade id -> source)."""
    nb = nbformat.read(ROOT / "course" / LESSON1, as_version=4)
    for gid, source in (replace or {}).items():
        next(c for c in nb.cells if grade_id(c) == gid).source = source
    at = len(nb.cells) if at_end else next(i for i, c in enumerate(nb.cells) if c.cell_type == "code") + 1
    for offset, source in enumerate(cells):
        nb.cells.insert(at + offset, nbformat.v4.new_code_cell(source))
    return nb


def grade(nb, tmp_path: Path, **kwargs):
    path = tmp_path / LESSON1
    nbformat.write(nb, path)
    return grade_notebook(path, **kwargs)


def pgrep(pattern: str) -> list[str]:
    """The pids of live processes whose command line holds ``pattern``."""
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


def assert_zero(report):
    assert report.score == 0, str(report)
    assert report.max_score >= 12


# --- checks switched off from inside the kernel ------------------------------------------------------------
def test_an_input_transformer_that_turns_every_cell_into_a_no_op_scores_zero(tmp_path):
    hook = ("ip = get_ipython()\n"
            "ip.input_transformers_post.append(lambda lines: ['pass\\n'])\n")
    assert_zero(grade(student_with(hook), tmp_path))


def test_redefined_helpers_and_a_patched_assert_machinery_score_zero(tmp_path):
    fake = ("import types, builtins\n"
            "row = types.SimpleNamespace(reached=True, finished=True, repeated_model_calls=0, ok=True, problems=[])\n"
            "crash_test = lambda *a, **k: types.SimpleNamespace(rows=[row], ok=True)\n"
            "builtins.AssertionError = type('AssertionError', (Exception,), {})\n"
            "import sys; sys.excepthook = lambda *a: None\n"
            "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n")
    assert_zero(grade(student_with(fake), tmp_path))


def test_a_module_that_patches_the_process_it_is_imported_into_scores_zero(tmp_path):
    """The student's own module tries to make every check pass where it is imported: it is imported
    only in the subject process, whose answers are plain data."""
    evil = ('%%writefile order_log.py\n'
            'import builtins, sys, os\n'
            'from crashlab.eventlog import CorruptLogError, append_event\n'
            'builtins.AssertionError = type("AssertionError", (Exception,), {})\n'
            'def read_events(path):\n'
            '    os._exit(0)\n')
    assert_zero(grade(student_with(replace={"ex1_read_events": evil}), tmp_path))


def test_importing_the_lessons_answers_from_the_library_scores_zero(tmp_path):
    """Lesson 1's answers ship in crashlab.answers for later lessons: grading lesson 1 refuses them
    (and hides the file from the student's processes when isolated)."""
    borrow = {
        "ex1_read_events": ("%%writefile order_log.py\n"
                            "from crashlab.eventlog import CorruptLogError, append_event\n"
                            "from crashlab.answers.lesson01 import read_events\n"),
        "ex2_rebuild": "%%writefile replay.py\nfrom crashlab.answers.lesson01 import rebuild\n",
        "ex3_logged_agent": ("%%writefile logged_agent.py\n"
                             "from crashlab.agent import agent_main, call_tool\n"
                             "from crashlab.answers.lesson01 import run_logged_order\n"
                             "if __name__ == '__main__':\n"
                             "    agent_main(lambda o: run_logged_order(o, lambda o, s, c: call_tool(c['name'], c['input'])))\n"),
    }
    assert_zero(grade(student_with(replace=borrow), tmp_path))


# --- an agent that knows it is under test, or edits the world -----------------------------------------------
def test_an_agent_that_fakes_its_crash_scores_zero(tmp_path):
    """It kills itself at start-up on its first run, as if it had reached any crash point."""
    agent = ('%%writefile logged_agent.py\n'
             'import os, signal\n'
             'from crashlab.agent import state_dir\n'
             'marker = state_dir() / "seen"\n'
             'if not marker.exists():\n'
             '    marker.write_text("x")\n'
             '    os.kill(os.getpid(), signal.SIGKILL)\n'
             'print("nothing to do")\n')
    report = grade(student_with(replace={"ex3_logged_agent": agent}), tmp_path)
    assert_zero(report)
    matrix = next(t for t in report.tests if t.name == "ex3_crash_matrix")
    assert "never reached" in matrix.output or "did not finish" in matrix.output, matrix.output


@ROOT_ONLY
def test_an_agent_that_deletes_ledger_rows_cannot_reach_them(tmp_path):
    """A naive agent that charges twice, then looks for the world's ledgers to delete the evidence."""
    agent = ('%%writefile logged_agent.py\n'
             'import glob, os, sqlite3\n'
             'from crashlab.agent import agent_main, call_tool\n'
             'def run(order_id):\n'
             '    for _ in range(2):\n'
             '        call_tool("charge_card", {"order_id": order_id, "amount": 49.99})\n'
             '    for db in glob.glob("/tmp/**/payments.db", recursive=True):\n'
             '        try:\n'
             '            sqlite3.connect(db).execute("DELETE FROM effects")\n'
             '        except Exception:\n'
             '            pass\n'
             'if __name__ == "__main__":\n'
             '    agent_main(run)\n')
    assert_zero(grade(student_with(replace={"ex3_logged_agent": agent}), tmp_path))


SURVIVOR = '''"""No durable state at all: at start-up the agent launches a helper in a session of its own, which
waits for the agent to die and then does the whole order again; a "resumed" process only waits for the
helper. Process groups and sessions do not catch the helper; only a kill of everything the crashed run
started does."""
import os, subprocess, sys, time
from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, call_tool, content_to_dicts, first_tool_use,
                            model_client, order_task, state_dir, tool_result_message)

def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

def do_the_order(order_id):
    messages = [{"role": "user", "content": order_task(order_id)}]
    for _ in range(10):
        reply = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        content = content_to_dicts(reply.content)
        if reply.stop_reason != "tool_use":
            (state_dir() / "done").write_text("ok")
            return
        call = first_tool_use(content)
        messages.append({"role": "assistant", "content": content})
        messages.append(tool_result_message(call["id"], call_tool(call["name"], call["input"])))

order_id = sys.argv[sys.argv.index("--order") + 1] if "--order" in sys.argv else "ORD-8842"
helper = state_dir() / "helper.pid"
if "--helper" in sys.argv:                    # the helper: wait for the agent's death, then take over
    original = int(sys.argv[-1])
    while alive(original):
        time.sleep(0.02)
    if not (state_dir() / "done").exists():
        do_the_order(order_id)
elif helper.exists():                         # a "resume": wait while the helper works
    while alive(int(helper.read_text())) and not (state_dir() / "done").exists():
        time.sleep(0.05)
else:
    spare = subprocess.Popen([sys.executable, __file__, "--order", order_id, "--helper", str(os.getpid())],
                             start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    helper.write_text(str(spare.pid))
    do_the_order(order_id)
'''


@ROOT_ONLY
def test_a_helper_that_survives_the_crash_and_finishes_the_order_fails_the_matrix(monkeypatch):
    """A crash takes everything the crashed run started with it, as a machine's crash does: each row of a
    matrix runs as a crash user of its own, and every process of that user dies after the crash. (Graded
    in full, the same cheat scores 0 of 12; here the matrix alone, which is what it attacks.)"""
    import tempfile

    from crashlab.harness import crash_test
    from crashlab.plumbing.sandbox_slot import SandboxSlot

    folder = Path(tempfile.mkdtemp(prefix="crashlab-redteam-"))
    try:
        (folder / "survivor_agent.py").write_text(SURVIVOR)
        with SandboxSlot(folder / "home") as sandbox:
            sandbox.own(folder)
            os.chmod(folder, 0o770)
            for name, value in sandbox.env({}).items():  # as the grader's process is set up
                monkeypatch.setenv(name, value)
            matrix = crash_test(folder / "survivor_agent.py", ["after:charge_card", "before:reserve_item"],
                                expect="observe", baseline=True, progress=False, timeout=30)
            assert not sandbox.processes(), "nothing of the rows outlived them"
    finally:
        subprocess.run(["rm", "-rf", str(folder)])
    baseline, *crashed = matrix.rows
    assert baseline.finished, f"the cheat works when nothing crashes: {baseline.problems}"
    for row in crashed:
        assert row.reached, row.problems
        assert not row.finished, f"{row.point}: the helper outlived the crash and finished the order: {row.effects}"


REWORDED = '''"""Durable-looking but not: every run starts the conversation again, each time with a task worded a
little differently, so no model request is byte-for-byte a repeat of an earlier one."""
import os
from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, agent_main, call_tool, content_to_dicts, first_tool_use,
                            model_client, order_task, state_dir, tool_result_message)

def run(order_id):
    runs = state_dir() / "runs"
    n = len(runs.read_text()) if runs.exists() else 0
    runs.write_text("x" * (n + 1))
    messages = [{"role": "user", "content": order_task(order_id) + " " * n + f" (attempt {n + 1})"}]
    for _ in range(10):
        reply = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        content = content_to_dicts(reply.content)
        if reply.stop_reason != "tool_use":
            return
        call = first_tool_use(content)
        messages.append({"role": "assistant", "content": content})
        messages.append(tool_result_message(call["id"], call_tool(call["name"], call["input"])))

if __name__ == "__main__":
    agent_main(run)
'''


def test_restarting_the_conversation_in_other_words_counts_as_repeated_model_calls(tmp_path):
    """The world sees every model request; a restart that rewords the task is still the model asked again
    for turns it had answered, and the row fails."""
    from crashlab.harness import crash_test

    (tmp_path / "reworded_agent.py").write_text(REWORDED)
    matrix = crash_test(tmp_path / "reworded_agent.py", ["after:charge_card"], expect="no-repeats", progress=False,
                        timeout=30)
    baseline, crashed = matrix.rows
    assert baseline.ok, baseline.problems
    assert crashed.reached and crashed.finished and not crashed.ok, crashed.problems
    assert any("a reworded conversation is still a repeat" in p for p in crashed.problems), crashed.problems


def test_an_exception_dressed_as_keyboard_interrupt_and_a_child_holding_stderr_do_not_stop_grading(tmp_path):
    """A function that raises KeyboardInterrupt (and one raising a class of its own named so) must not
    end grading as if the grader were interrupted; a child left holding the notebook's stderr must not
    make grading wait for it. Every check is still scored, and the results are written."""
    interrupting = ('%%writefile order_log.py\n'
                    'from crashlab.eventlog import CorruptLogError, append_event\n'
                    'class KeyboardInterrupt(Exception):\n'
                    '    pass\n'
                    'def read_events(path):\n'
                    '    raise KeyboardInterrupt("stop the judge")\n')
    real = ('%%writefile replay.py\n'
            'def rebuild(events):\n'
            '    raise KeyboardInterrupt\n')
    holder = "import subprocess\nsubprocess.Popen(['sleep', '3600'])  # inherits the notebook's stderr, outlives the deadline\n"
    out = tmp_path / "results.json"
    report = grade(student_with(holder, replace={"ex1_read_events": interrupting, "ex2_rebuild": real}), tmp_path,
                   json_out=out)
    assert not any("deadline" in note for note in report.notes), f"grading waited for the child: {report.notes}"
    assert_zero(report)
    assert len(report.tests) == 4 and json.loads(out.read_text())["score"] == 0


def test_the_harness_never_reads_a_file_an_agent_links_its_output_to(tmp_path):
    """Root reads what agents print; an agent that swaps its output file for a symlink to a file only
    root can read must not get that file into its run's output (and so into feedback)."""
    from crashlab.harness import run_agent
    from crashlab.harness.launcher import WarmLauncher
    from crashlab.world import World

    secret = tmp_path / "secret.txt"
    secret.write_text("ROOT-ONLY-SECRET")
    os.chmod(secret, 0o600)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "linker.py").write_text(
        "import os, sys\n"
        "out = os.readlink('/proc/self/fd/1')\n"
        "os.unlink(out)\n"
        f"os.symlink({str(secret)!r}, out)\n")
    with World.start(tmp_path / "world") as world, WarmLauncher() as warm:
        run = run_agent(tmp_path / "agent" / "linker.py", world, launcher=warm, timeout=30)
    assert "ROOT-ONLY-SECRET" not in run.stdout + run.stderr


def test_a_planted_world_log_link_is_never_written_through(tmp_path):
    """A world started in a folder a student controls opens its log without following a symlink."""
    from crashlab.world import World

    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    state = tmp_path / "state"
    state.mkdir()
    (state / ".crashlab-world").write_text("")  # a world's folder, which the world would start in
    (state / "world.log").symlink_to(victim)
    with pytest.raises(OSError):
        World.start(state, fresh=False)
    assert victim.read_text() == "untouched"


# --- the kernel with the grader's privileges --------------------------------------------------------------------
@ROOT_ONLY
def test_forged_results_and_a_rewritten_library_do_not_count(tmp_path):
    out = tmp_path / "results.json"
    library = Path(crashlab.__file__).parent / "agent" / "tools.py"
    before = hashlib.sha256(library.read_bytes()).hexdigest()
    forge = (f"import json\n"
             f"full = {{'score': 12, 'max_score': 12, 'tests': []}}\n"
             f"for target in ({str(out)!r}, {str(library)!r}):\n"
             f"    try:\n"
             f"        open(target, 'w').write(json.dumps(full))\n"
             f"    except OSError as exc:\n"
             f"        print('refused:', exc)\n"
             f"import glob\n"
             f"for cmd in glob.glob('/proc/*/cmdline'):\n"
             f"    try:\n"
             f"        print(open(cmd).read()[:80])\n"
             f"    except OSError:\n"
             f"        pass\n")
    report = grade(student_with(forge), tmp_path, json_out=out)
    assert_zero(report)
    written = json.loads(out.read_text())
    assert written["score"] == 0 and written["isolated"] is True and written["tests"]
    assert hashlib.sha256(library.read_bytes()).hexdigest() == before, "the installed library was rewritten"


@ROOT_ONLY
def test_the_masters_are_hidden_from_the_students_code(tmp_path):
    """Copy the master's answers out of solutions/ at grading time: the folder is empty to the student."""
    steal = (f"import json\n"
             f"master = json.load(open({str(ROOT / 'solutions' / LESSON1)!r}))\n"
             f"for cell in master['cells']:\n"
             f"    source = ''.join(cell['source'])\n"
             f"    if source.startswith('%%writefile'):\n"
             f"        name, body = source.split('\\n', 1)\n"
             f"        open(name.split()[-1], 'w').write(body)\n")
    assert_zero(grade(student_with(steal, at_end=True), tmp_path))


@ROOT_ONLY
def test_the_masters_in_the_git_history_are_hidden_too(tmp_path):
    """The same answers, read from the repository's history instead of the working tree."""
    steal = (f"import json, subprocess\n"
             f"shown = subprocess.run(['git', '-c', 'safe.directory=*', '-C', {str(ROOT)!r}, 'show',\n"
             f"                        'HEAD:solutions/{LESSON1}'], capture_output=True, text=True).stdout\n"
             f"for cell in json.loads(shown)['cells']:\n"
             f"    source = ''.join(cell['source'])\n"
             f"    if source.startswith('%%writefile'):\n"
             f"        name, body = source.split('\\n', 1)\n"
             f"        open(name.split()[-1], 'w').write(body)\n")
    assert_zero(grade(student_with(steal, at_end=True), tmp_path))


@ROOT_ONLY
def test_killing_everything_it_can_see_does_not_stop_grading(tmp_path):
    attack = ("import os, signal\n"
              "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
              "    if pid != os.getpid():\n"
              "        try:\n"
              "            os.kill(pid, signal.SIGKILL)\n"
              "        except OSError:\n"
              "            pass\n")
    report = grade(student_with(attack), tmp_path)
    assert_zero(report)
    assert len(report.tests) == 4, "every check was still scored"


# --- grading that would hang for ever or leave things behind -----------------------------------------------------
@ROOT_ONLY
def test_a_cell_that_ignores_signals_and_a_daemon_are_stopped_at_the_deadline(tmp_path):
    marker = f"crashlab-redteam-{os.getpid()}"
    attack = ("import os, signal, subprocess, time\n"
              f"subprocess.Popen(['sleep', '3600', '--', {marker!r}], start_new_session=True)\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              f"        os.execvp('sleep', ['sleep', '3601', {marker!r}])\n"
              "    os._exit(0)\n"
              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
              "while True:\n"
              "    try:\n"
              "        time.sleep(1)\n"
              "    except BaseException:\n"
              "        pass\n")
    out = tmp_path / "results.json"
    started = time.monotonic()
    report = grade(student_with(attack), tmp_path, json_out=out, deadline=25, cell_timeout=600)
    assert time.monotonic() - started >= 25, "stopped before its deadline"
    print(f"grading ended {time.monotonic() - started:.1f} s after it started (deadline 25 s)")
    assert_zero(report)
    assert json.loads(out.read_text())["score"] == 0, "the results were still written"
    assert any("deadline" in note for note in report.notes), report.notes
    left = pgrep(marker)
    assert not left, f"processes the submission started outlived grading: {left}"


@ROOT_ONLY
def test_a_cell_that_takes_10_gib_is_capped(tmp_path):
    hog = "block = bytearray(10 * 1024 ** 3)\n"
    report = grade(student_with(hog), tmp_path)
    assert_zero(report)


# --- results that are stale or come from an interrupted run ------------------------------------------------------
def test_a_stale_or_committed_results_file_scores_nothing(tmp_path):
    forged = tmp_path / "results-01.json"
    forged.write_text(json.dumps({"score": 12, "max_score": 12, "run_id": "last-week",
                                  "tests": [{"name": "ex3_crash_matrix", "score": 4, "max_score": 4, "output": ""}]}))
    env = {**os.environ, "CRASHLAB_RUN_ID": "this-run"}
    done = subprocess.run([sys.executable, "-m", "crashlab.cli", "result", str(forged), "--test", "ex3_crash_matrix"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "not written by this grading run" in done.stderr
    forged.write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "crashlab.cli", "result", str(forged), "--test", "ex3_crash_matrix"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_an_interrupted_grading_writes_no_score_and_fails(tmp_path):
    """SIGTERM while the master's notebook runs: its last cell waits on a process we can see, so the signal lands
    mid-grading on any machine (a fixed sleep before it let a fast machine finish the grading first)."""
    marker = f"crashlab-interrupted-grading-{os.getpid()}-{time.monotonic_ns()}"
    nb = nbformat.read(ROOT / "solutions" / LESSON1, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import time; time.sleep(3600)', {marker!r}])\n"))
    path, out = tmp_path / LESSON1, tmp_path / "results.json"
    nbformat.write(nb, path)
    process = subprocess.Popen([sys.executable, "-m", "crashlab.cli", "grade", str(path), "--json", str(out),
                                "--timeout", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not pgrep(marker) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert process.poll() is None and pgrep(marker), "the grading never reached the notebook's last cell"
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        for pid in pgrep(marker):
            os.kill(int(pid), signal.SIGKILL)
    assert process.returncode != 0, stderr[-800:]
    assert not out.exists(), "an interrupted grading must not leave a score behind"
    assert "score" not in stdout.lower(), stdout


# --- the fair side -------------------------------------------------------------------------------------------
def test_the_master_scores_full_marks_without_isolation(tmp_path):
    out = tmp_path / "results.json"
    report = grade_notebook(ROOT / "solutions" / LESSON1, isolate=False, json_out=out)
    assert report.score == report.max_score, str(report)
    assert json.loads(out.read_text())["isolated"] is False
