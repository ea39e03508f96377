"""The grader proves itself: masters score full marks, student notebooks score zero, known-wrong
answers score less than full, and tampering with test cells or with the harness does not pay."""

import copy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from crashlab.grading.grade import GradingError, grade_notebook, restore_locked_cells
from crashlab.grading.isolation import NOT_RUN_WHILE_GRADING, keep_only_what_the_submission_writes
from crashlab.course.notebooks import grade_id, is_answer_cell, is_test_cell

ROOT = Path(__file__).resolve().parents[2]
LESSON1 = "01_naive_event_log.ipynb"


def read(path):
    return nbformat.read(path, as_version=4)


def with_cell(nb, gid, source):
    """A copy of ``nb`` where the cell ``gid`` has a new source."""
    nb = copy.deepcopy(nb)
    cells = [c for c in nb.cells if grade_id(c) == gid]
    assert cells, f"no cell {gid}"
    cells[0].source = source
    return nb


def replace_solution(source, new_body):
    """``source`` with the region between the solution markers replaced by ``new_body``."""
    head, rest = source.split("# BEGIN SOLUTION", 1)
    _, tail = rest.split("# END SOLUTION", 1)
    indent = head[head.rfind("\n") + 1:]  # the marker's indentation, already at the end of head
    first, *others = new_body.strip("\n").splitlines()
    return head + "\n".join([first] + [indent + line for line in others]) + tail


def save(nb, folder: Path, name=LESSON1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    nbformat.write(nb, path)
    return path


def scores(report):
    return {t.name: t.score for t in report.tests}


# Lesson 1's master scoring full marks and its student notebook zero (with the matrix check saying the crash
# point was never reached because of NotImplementedError) are proved through the Gradescope bundle, in
# tests/grading/test_autograder.py: the same grader, one grading each instead of two.


def test_replay_that_asks_the_model_again_scores_less_than_full(tmp_path):
    """A known-wrong answer: the replay keeps only decision/result pairs, so a decision that was
    logged before the crash is asked of the model again on resume."""
    master = read(ROOT / "solutions" / LESSON1)
    cell = next(c for c in master.cells if grade_id(c) == "ex2_rebuild")
    wrong = replace_solution(cell.source, '''
messages = [{"role": "user", "content": task}]
for decision, result in zip(events[0::2], events[1::2]):
    messages.append({"role": "assistant", "content": decision["content"]})
    messages.append(tool_result_message(result["tool_use_id"], result["result"]))
return messages, None
''')
    report = grade_notebook(save(with_cell(master, "ex2_rebuild", wrong), tmp_path))
    assert report.score < report.max_score
    got = scores(report)
    assert got["ex1_read_events_checks"] == 3, "the untouched exercise keeps its points"
    assert got["ex2_rebuild_checks"] == 0
    matrix = next(t for t in report.tests if t.name == "ex3_crash_matrix")
    assert matrix.score < matrix.max_score
    assert "before:charge_card" in matrix.output and "repeated model call" in matrix.output, matrix.output


def test_edited_and_deleted_test_cells_are_restored_and_a_fake_harness_does_not_pay(tmp_path):
    """A student who empties the checks, deletes one, and swaps the in-kernel harness for a fake
    still scores zero: test cells come back from the master and the matrix runs out of the kernel."""
    student = read(ROOT / "course" / LESSON1)
    student = with_cell(student, "ex1_read_events_checks", "pass")
    student.cells = [c for c in student.cells if grade_id(c) != "ex2_rebuild_checks"]
    fake = '''%%writefile logged_agent.py
raise SystemExit(0)
'''
    student = with_cell(student, "ex3_logged_agent", fake)
    cheat = nbformat.v4.new_code_cell(
        "import types\n"
        "fake_row = types.SimpleNamespace(reached=True, finished=True, repeated_model_calls=0, ok=True, problems=[])\n"
        "crash_test = lambda *a, **k: types.SimpleNamespace(rows=[fake_row])")
    index = next(i for i, c in enumerate(student.cells) if grade_id(c) == "ex3_logged_agent")
    student.cells.insert(index + 1, cheat)
    report = grade_notebook(save(student, tmp_path))
    got = scores(report)
    assert set(got) >= {"ex1_read_events_checks", "ex2_rebuild_checks", "ex3_logged_agent_checks", "ex3_crash_matrix"}
    assert got["ex1_read_events_checks"] == 0 and got["ex2_rebuild_checks"] == 0
    assert got["ex3_crash_matrix"] == 0, "the out-of-kernel matrix must not be fooled"
    assert any("restored edited cell 'ex1_read_events_checks'" in n for n in report.notes)
    assert any("restored deleted cell 'ex2_rebuild_checks'" in n for n in report.notes)


def test_restore_puts_back_deleted_cells_in_place_and_ignores_added_grade_cells():
    master = read(ROOT / "solutions" / LESSON1)
    student = read(ROOT / "course" / LESSON1)
    student.cells = [c for c in student.cells if grade_id(c) != "ex1_read_events_checks"]
    forged = nbformat.v4.new_code_cell("pass")
    forged.metadata["nbgrader"] = {"schema_version": 3, "grade": True, "solution": False, "locked": True,
                                   "grade_id": "bonus", "points": 100}
    student.cells.append(forged)
    restored, notes = restore_locked_cells(student, master)
    ids = [grade_id(c) for c in restored.cells if grade_id(c)]
    assert ids.index("ex1_read_events_checks") == ids.index("ex1_read_events") + 1
    assert "bonus" not in ids
    assert [c for c in restored.cells if is_test_cell(c)][0].source == \
        next(c for c in master.cells if grade_id(c) == "ex1_read_events_checks").source
    assert any("bonus" in n for n in notes)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "course").glob("*.ipynb")))
def test_grading_runs_only_the_cells_that_write_the_submission(name):
    """Given cells are left out of the graded run whether they read as in the master or as in the student
    notebook (nbval comments moved to tags): lesson 11's benchmark once ran in every grading."""
    master = read(ROOT / "solutions" / name)
    nb, _ = restore_locked_cells(read(ROOT / "course" / name), master)
    blanked = keep_only_what_the_submission_writes(nb, master)
    run = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "code" and c.source != NOT_RUN_WHILE_GRADING
           and not is_answer_cell(c) and not c.source.startswith("%%writefile")]
    assert blanked > 0 and run == []


def test_not_a_notebook_is_a_clear_error(tmp_path):
    junk = tmp_path / "homework.ipynb"
    junk.write_text("this is not json")
    with pytest.raises(GradingError, match="not a Jupyter notebook"):
        grade_notebook(junk)
    stranger = tmp_path / "stranger.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), stranger)
    with pytest.raises(GradingError, match="not a course notebook"):
        grade_notebook(stranger)


@pytest.mark.parametrize("break_it", [lambda cell: cell.update(source=5), lambda cell: cell.pop("source")],
                         ids=["a number", "none"])
def test_a_cell_without_text_for_its_source_is_refused_before_anything_runs(tmp_path, break_it):
    """nbformat reads such a notebook with a warning; the grader ran it and then failed in the judge with an
    AttributeError traceback."""
    import json

    nb = json.loads((ROOT / "course" / "01_naive_event_log.ipynb").read_text())
    break_it(nb["cells"][3])
    broken = tmp_path / "01_naive_event_log.ipynb"
    broken.write_text(json.dumps(nb))
    with pytest.raises(GradingError, match="not a Jupyter notebook .its cell 4 has no text for its source"):
        grade_notebook(broken)


def test_cli_grade_errors_are_one_line_without_traceback(tmp_path):
    junk = tmp_path / "x.ipynb"
    junk.write_bytes(b"\x00\x01")
    done = subprocess.run([sys.executable, "-m", "crashlab.cli", "grade", str(junk)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error:") and "Traceback" not in done.stderr


def test_the_printed_table_wraps_feedback_whole_instead_of_cutting_it():
    from crashlab.grading.report import GradeReport, TestResult

    said = ("3/15 crash points clean (expected: finished, no repeated model call except one at after:model#N "
            "(duplicates allowed)); any failing crash point scores 0 for this check")
    report = GradeReport("x.ipynb", "01", [TestResult("ex3_crash_matrix", 0, 4, said + "\n- before:model#1: ...", "matrix")])
    table = report.table(width=80)
    assert all(len(line) <= 80 for line in table.splitlines()), table
    rows = table.splitlines()[2:table.splitlines().index(next(t for t in table.splitlines() if t.startswith("total")))]
    assert " ".join(" ".join(line.split()) for line in rows).endswith("scores 0 for this check"), table


def test_a_submissions_processes_learn_where_the_servers_binaries_are_and_no_other_crashlab_setting(tmp_path,
                                                                                                     monkeypatch):
    """A notebook that starts a Temporal or Restate server itself finds a binary installed elsewhere; the
    addresses of the grader's own servers, and the rest of its settings, stay the grader's."""
    from crashlab.grading.isolation import Isolation

    monkeypatch.setenv("CRASHLAB_TEMPORAL_BIN", "/opt/temporal")
    monkeypatch.setenv("CRASHLAB_RESTATE_BIN", "/opt/restate-server")
    monkeypatch.setenv("CRASHLAB_RESTATE_INGRESS", "http://127.0.0.1:1")
    isolation = Isolation(tmp_path, False, hide=())
    try:
        env = isolation.env(trusted=False)
    finally:
        isolation.close()
    assert env["CRASHLAB_TEMPORAL_BIN"] == "/opt/temporal" and env["CRASHLAB_RESTATE_BIN"] == "/opt/restate-server"
    assert "CRASHLAB_RESTATE_INGRESS" not in env and "CRASHLAB_PRIVATE_DIR" not in env


@pytest.mark.parametrize("lesson, given_id, agent", [("05_temporal", "temporal_agent_given", "temporal_agent.py"),
                                                     ("06_restate", "restate_agent_given", "restate_agent.py")])
def test_a_given_engine_agent_is_locked_and_the_matrix_runs_the_masters_copy(lesson, given_id, agent):
    """The agent that runs the order on the engine is given. An edited copy comes back from the master, and the
    crash matrix runs the master's copy (reference_answers), so a plain loop written in its place cannot earn the
    matrix's points from the ledgers alone."""
    master = read(ROOT / "solutions" / f"{lesson}.ipynb")
    given = next(c for c in master.cells if grade_id(c) == given_id)
    assert given.source.startswith(f"%%writefile {agent}") and given.metadata.nbgrader["locked"]
    assert given_id in master.metadata["crashlab"]["reference_answers"]
    check = next(c for c in master.metadata["crashlab"]["matrix_checks"] if c["name"] == "ex2_crash_matrix")
    assert check["agent"] == agent and check["on_reference_answers"]
    submission = read(ROOT / "solutions" / f"{lesson}.ipynb")
    edited = next(c for c in submission.cells if grade_id(c) == given_id)
    edited.source = f"%%writefile {agent}\nprint('[done] a plain loop, no engine')\n"
    restored, notes = restore_locked_cells(submission, master)
    assert next(c for c in restored.cells if grade_id(c) == given_id).source == given.source
    assert f"restored edited cell '{given_id}' from the master" in notes


def test_cli_grade_says_what_it_is_doing_and_quiet_keeps_to_the_table(tmp_path):
    """A grading takes minutes on a loaded machine: each stage is printed as it starts (stderr), each check's
    score as it is known, and the matrices show a bar; --quiet prints only the table (stdout either way)."""
    notebook = ROOT / "course" / "01_naive_event_log.ipynb"
    said = subprocess.run([sys.executable, "-m", "crashlab.cli", "grade", str(notebook)], capture_output=True,
                          text=True, timeout=600)
    assert said.returncode == 0, said.stderr
    for stage in ("running the notebook as the student", "judging your answers", "ex1_read_events_checks: 0/3",
                  "crash matrix ex3_crash_matrix"):
        assert stage in said.stderr, said.stderr
    quiet = subprocess.run([sys.executable, "-m", "crashlab.cli", "grade", str(notebook), "--quiet"],
                           capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert "score 0 / 12" in quiet.stdout
