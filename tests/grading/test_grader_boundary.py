"""The grader's boundary: what is the student's own, what a sandboxed process may see and inherit, how every
one of its processes dies, and one deadline for everything.

Each cheat starts from the unanswered student notebook of lesson 1 (honest score 0) and adds one attack, as in
test_redteam.py; the fair side (renamed downloads, the master graded through a batch) scores full marks.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from crashlab.engines import registry
from crashlab.plumbing import sandbox as sandboxes
from crashlab.grading.batch import discover
from crashlab.grading.gradescope import find_submitted
from crashlab.grading.grade import grade_notebook
from crashlab.grading.proxies import StudentModules
from crashlab.grading.report import GradingError
from crashlab.grading.submissions import masters_by_lesson
from test_redteam import LESSON1, ROOT, ROOT_ONLY, assert_zero, grade, student_with

SOLUTIONS = ROOT / "solutions"
MASTERS = sorted(SOLUTIONS.glob("*.ipynb"))


def steal_from(path: Path) -> str:
    """A cell that writes a master's %%writefile answers from ``path`` into the student's folder."""
    return (f"import json\n"
            f"try:\n"
            f"    master = json.load(open({str(path)!r}))\n"
            f"except OSError:\n"
            f"    master = {{'cells': []}}\n"
            f"for cell in master['cells']:\n"
            f"    source = ''.join(cell['source'])\n"
            f"    if source.startswith('%%writefile'):\n"
            f"        name, body = source.split('\\n', 1)\n"
            f"        open(name.split()[-1], 'w').write(body)\n")


# --- the student's own bytes ------------------------------------------------------------------------------------
def test_a_submission_that_is_a_link_to_the_master_is_refused_with_its_reason(tmp_path):
    link = tmp_path / LESSON1
    link.symlink_to(SOLUTIONS / LESSON1)
    with pytest.raises(GradingError, match="symbolic link"):
        grade_notebook(link)


def test_a_submission_reached_through_a_linked_folder_is_refused(tmp_path):
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "work").symlink_to(SOLUTIONS)
    with pytest.raises(GradingError, match="symbolic link"):
        grade_notebook(tmp_path / "student" / "work" / LESSON1, within=tmp_path / "student")


def test_a_batch_refuses_linked_notebooks_and_linked_student_folders(tmp_path):
    honest = tmp_path / "alice"
    honest.mkdir()
    shutil.copy(ROOT / "course" / LESSON1, honest / "01_naive_event_log (1).ipynb")  # a browser's rename
    cheat = tmp_path / "bob"
    cheat.mkdir()
    (cheat / LESSON1).symlink_to(SOLUTIONS / LESSON1)
    (tmp_path / "carol").symlink_to(honest, target_is_directory=True)  # a "student" who is someone else
    batch = discover(tmp_path, SOLUTIONS)
    assert sorted(batch.students) == ["alice", "bob"]
    assert [s.master.name for s in batch.students["alice"]] == [LESSON1]
    from crashlab.grading.submissions import unreadable

    (bob,) = batch.students["bob"]
    assert "symbolic link" in unreadable(bob.path, bob.folder)
    assert unreadable(batch.students["alice"][0].path, honest) is None


def test_gradescope_finds_a_renamed_download_and_prefers_the_exact_name(tmp_path):
    shutil.copy(ROOT / "course" / LESSON1, tmp_path / "01_naive_event_log (1).ipynb")
    lessons = masters_by_lesson(MASTERS)
    master = SOLUTIONS / LESSON1
    assert [p.name for p in find_submitted(tmp_path, master, MASTERS, lessons)] == ["01_naive_event_log (1).ipynb"]
    (tmp_path / "deeper").mkdir()
    shutil.copy(ROOT / "course" / LESSON1, tmp_path / "deeper" / LESSON1)
    assert find_submitted(tmp_path, master, MASTERS, lessons)[0].name == LESSON1


# --- what a student's process inherits ------------------------------------------------------------------------
def test_a_student_process_inherits_an_allow_list_while_grading(monkeypatch):
    monkeypatch.setenv("CRASHLAB_GRADING_LESSON", "01")
    for secret in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "CRASHLAB_BUNDLE_KEY",
                   "CRASHLAB_GRADER_TOKEN", "OLDPWD"):
        monkeypatch.setenv(secret, "s3cret-" + secret)
    env = sandboxes.child_env({**os.environ, "DURABILITY": "sync", "CRASHLAB_MODEL_URL": "http://127.0.0.1:1"},
                              engines=registry.student_env())
    assert not [k for k, v in env.items() if v.startswith("s3cret-")], env
    assert env["DURABILITY"] == "sync", "what the trusted caller set for this run is kept"
    assert env["CRASHLAB_MODEL_URL"] == "http://127.0.0.1:1" and env["PATH"] == os.environ["PATH"]


def test_outside_grading_a_learner_keeps_their_own_environment(monkeypatch):
    monkeypatch.delenv("CRASHLAB_GRADING_LESSON", raising=False)
    monkeypatch.delenv("CRASHLAB_SANDBOX", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-learners-own")
    assert sandboxes.child_env(dict(os.environ), engines=registry.student_env())["ANTHROPIC_API_KEY"] == "the-learners-own"


# --- the judge imports only what it means to ----------------------------------------------------------------------
def test_the_judge_proxies_only_the_masters_module_names(tmp_path):
    for name in ("keys", "httpx", "json"):
        (tmp_path / f"{name}.py").write_text("x = 1\n")
    finder = StudentModules(tmp_path, {"keys", "_notebook_answers"})
    assert finder.find_spec("keys") is not None
    assert finder.find_spec("httpx") is None and finder.find_spec("json") is None
    assert finder.find_spec("_notebook_answers") is None, "no such file: nothing to proxy"


# --- what a sandboxed process can see -------------------------------------------------------------------------
@ROOT_ONLY
def test_no_copy_of_the_course_anywhere_on_the_machine_is_in_the_sandboxs_view(tmp_path):
    """A second checkout's masters, a classmate's submission beside this one, the bytecode of the answers being
    graded, and secrets in the grader's environment: the graded run finds none of them, no results file or feedback
    holds them, and none is in the environment, stack or memory of any process that runs the student's code (the
    kernel, the subject, every agent of the checks and the matrix) or forks one (the warm launchers, the judge),
    read as root while the grading runs. And --keep keeps what the next command's sweep would otherwise remove."""
    other = Path(os.environ.get("TMPDIR", "/tmp")) / f"crashlab-second-checkout-{os.getpid()}"
    (other / "solutions").mkdir(parents=True, exist_ok=True)
    shutil.copy(SOLUTIONS / LESSON1, other / "solutions" / LESSON1)
    classmate = tmp_path / "classmate"
    classmate.mkdir()
    shutil.copy(SOLUTIONS / LESSON1, classmate / LESSON1)
    mine = tmp_path / "me"
    mine.mkdir()
    from crashlab.harness.launcher import close_kept_launchers
    from crashlab.plumbing.scratch import sweep_scratch
    from test_redteam_box import Sampler

    secret = f"s3cret-{os.urandom(8).hex()}-VALUE"
    saved = dict(os.environ)
    os.environ.update({"ANTHROPIC_API_KEY": secret, "GITHUB_TOKEN": secret, "CRASHLAB_BUNDLE_KEY": secret,
                       "AWS_SECRET_ACCESS_KEY": secret})
    close_kept_launchers()  # the warm launcher that forks the agents and the judge starts after the secrets are set
    sampler = Sampler()
    try:
        probe = ("import json, os\n"
                 "found = {k: v for k, v in os.environ.items() if 's3cret' in v}\n"
                 "found['visible'] = [p for p in [" + repr(str(other / "solutions" / LESSON1)) + ", "
                 + repr(str(classmate / LESSON1)) + "] if os.path.exists(p)]\n"
                 "found['pyc'] = []\n"  # every file the process can see but the kernel's (/proc, /sys, /dev)
                 "for d, ds, fs in os.walk('/'):\n"
                 "    ds[:] = [x for x in ds if d != '/' or x not in ('proc', 'sys', 'dev')]\n"
                 "    if d.endswith('answers/__pycache__'):\n"
                 "        found['pyc'] += [os.path.join(d, f) for f in fs if f.startswith('lesson01')]\n"
                 "json.dump(found, open('found.json', 'w'))\n")
        cells = [steal_from(other / "solutions" / LESSON1), steal_from(classmate / LESSON1)]
        out = tmp_path / "results.json"
        nb = student_with(*cells, at_end=True)
        nb.cells.append(nbformat.v4.new_code_cell(probe))
        nbformat.write(nb, mine / LESSON1)
        report = grade_notebook(mine / LESSON1, json_out=out, keep=True)
    finally:
        in_processes = sampler.stop()
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(other, ignore_errors=True)
        close_kept_launchers()
    kept = Path(next(n for n in report.notes if "scratch directory kept" in n).split(" at ", 1)[1])
    try:
        found = json.loads((kept / "found.json").read_text())
        sweep_scratch()  # what the next command does first: --keep keeps
        assert kept.is_dir()
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    assert found == {"visible": [], "pyc": []}, found
    assert not in_processes, f"the secrets in a process that runs or forks the student's code: {in_processes}"
    assert_zero(report)
    assert secret not in out.read_text() and secret not in str(report)


@ROOT_ONLY
def test_the_answers_bytecode_is_hidden_with_their_source(tmp_path):
    """Load the answers of lesson 1 from their compiled file (which `make setup` makes) and write the agent the
    lesson asks for from them: the folder is empty to the student."""
    import crashlab.answers

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(crashlab.answers.__file__).parent)],
                   check=True)
    cache = Path(crashlab.answers.__file__).parent / "__pycache__"
    assert list(cache.glob("lesson01*.pyc")), "the attack needs the compiled answers to exist"
    load = ("import glob, marshal, types\n"
            "for path in glob.glob(" + repr(str(cache / "lesson01*.pyc")) + "):\n"
            "    code = marshal.loads(open(path, 'rb').read()[16:])\n"
            "    open('stolen.txt', 'w').write(repr(code.co_names))\n"
            "    raise SystemExit('the answers loaded')\n")
    report = grade(student_with(load, at_end=True), tmp_path, keep=True)
    kept = Path(next(n for n in report.notes if "scratch directory kept" in n).split(" at ", 1)[1])
    try:
        assert not (kept / "stolen.txt").exists()
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    assert_zero(report)


# --- every process dies, every time ---------------------------------------------------------------------------
def hopper(beat: Path) -> str:
    """A process that forks and exits every few milliseconds (its pid is never the same for long, so it is on no
    listing of the processes), in a new session each time, and beats a file while it lives."""
    return ("import os, time\n"
            "while True:\n"
            "    if os.fork():\n"
            "        os._exit(0)\n"
            "    try:\n"
            "        os.setsid()\n"
            "    except OSError:\n"
            "        pass\n"
            f"    with open({str(beat)!r}, 'a') as f:\n"
            "        f.write('.')\n"
            "    time.sleep(0.02)\n")


@ROOT_ONLY
@pytest.mark.parametrize("trial", range(3))
def test_processes_that_hop_pids_all_die(tmp_path, trial):
    from crashlab.plumbing.sandbox_slot import SandboxSlot

    import tempfile

    beats = Path(tempfile.mkdtemp(prefix="crashlab-hoppers-"))  # pytest's own folder is root's alone
    os.chmod(beats, 0o777)
    # Their orphans come to this process, which reaps them: left to a slow init, hundreds of zombies would count
    # against the sandbox user's process cap for the next grading in this slot.
    sandboxes.become_subreaper()
    with SandboxSlot(tmp_path / "home") as sandbox:
        for k in range(3):
            subprocess.Popen([sys.executable, "-c", hopper(beats / f"hopper{k}")], user=sandbox.uid,
                             group=sandbox.gid, extra_groups=[], start_new_session=True, cwd=beats,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        assert all((beats / f"hopper{k}").stat().st_size > 5 for k in range(3)), "the hoppers run"
        sandbox.kill_all()
        before = [(beats / f"hopper{k}").stat().st_size for k in range(3)]
        time.sleep(0.5)
        after = [(beats / f"hopper{k}").stat().st_size for k in range(3)]
    sandboxes.become_subreaper(False)  # and reaps what is dead
    shutil.rmtree(beats, ignore_errors=True)
    assert after == before, "a hopper still beats"


@ROOT_ONLY
def test_a_slot_removes_what_a_killed_grader_left_in_it(tmp_path):
    from crashlab.plumbing.sandbox_slot import SandboxSlot

    left = Path(os.environ.get("TMPDIR", "/tmp")) / f"crashlab-grade-left-{os.getpid()}"
    left.mkdir()
    (left / "submission.ipynb").write_text("{}")
    slot = SandboxSlot(tmp_path / "home")
    slot.leave_behind([left])
    slot._lock.close()  # as if the grader died by SIGKILL: the lock goes, the record stays
    slot._lock = None
    again = SandboxSlot(tmp_path / "home")
    try:
        assert again.slot == slot.slot and not left.exists()
    finally:
        again.close()


# --- one deadline for everything ------------------------------------------------------------------------------
SLOW_AGENT = "import time\ntime.sleep(120)\n"


def test_the_deadline_stops_a_matrix_that_has_started(tmp_path):
    from crashlab.harness import crash_test

    agent = tmp_path / "slow_agent.py"
    agent.write_text(SLOW_AGENT)
    matrix = crash_test(agent, ["before:charge_card", "after:charge_card", "before:reserve_item"], jobs=2,
                        timeout=100, progress=False, launcher="exec", deadline=time.monotonic() + 2)
    assert matrix.past_deadline and matrix.not_run >= 3 and not matrix.ok


def test_results_say_timed_out_for_a_matrix_stopped_at_the_deadline(tmp_path):
    from crashlab.grading.checks import score_matrix_check

    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    check = {"name": "ex_matrix", "points": 4, "agent": "slow_agent.py", "crash_points": ["after:charge_card"],
             "timeout": 100, "launcher": "exec"}
    result = score_matrix_check(check, tmp_path, deadline=time.monotonic() + 2)
    assert result.score == 0 and result.output.startswith("timed out"), result.output
    assert json.dumps(result.as_dict())


# --- no master reaches the sandbox through a later lesson -------------------------------------------------------
# Lesson 11's checks run lesson 1's and 2's agents, as their masters write them: a `predict` that reads them and
# raises with their text does not see them. Graded in the same isolated grading as the brute-force self-check
# (tests/grading/test_fair_by_exercise.py::test_a_notebook_that_tries_every_choice_scores_only_its_honest_points).


# --- feedback names files as the student knows them -----------------------------------------------------------
def test_feedback_never_shows_the_graders_folders(tmp_path):
    from crashlab.grading.report import without_grader_paths

    folders = {"/tmp/crashlab-grade-ab12": "", "/tmp/crashlab-rows-q": "(the grader's scratch folder)/"}
    said = "No such file: '/tmp/crashlab-grade-ab12/.crashlab/x.jsonl'; row /tmp/crashlab-rows-q/row-3 failed"
    assert without_grader_paths(said, folders) == \
        "No such file: '.crashlab/x.jsonl'; row (the grader's scratch folder)/row-3 failed"
    given = next(c for c in nbformat.read(ROOT / "course" / LESSON1, as_version=4).cells
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ex1_read_events").source
    missing_file = given.replace("raise NotImplementedError()",
                                 "import os\n    return open(os.path.abspath('no-such-file.jsonl')).read()")
    report = grade(student_with(replace={"ex1_read_events": missing_file}), tmp_path)
    feedback = "\n".join(t.output for t in report.tests)
    assert "no-such-file.jsonl" in feedback, feedback
    assert "crashlab-grade-" not in feedback and "crashlab-rows-" not in feedback, feedback
    assert "subject.py" not in feedback and "<frozen" not in feedback, feedback


def test_a_batch_of_an_empty_or_wrong_folder_is_an_error_not_a_gradebook_of_zeros(tmp_path):
    from crashlab.grading.batch import grade_batch

    (tmp_path / "subs" / "alice").mkdir(parents=True)
    with pytest.raises(GradingError, match="no course notebook"):
        grade_batch(tmp_path / "subs", tmp_path / "results", progress=False)
