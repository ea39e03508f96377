"""The masters are well-formed nbgrader source notebooks, and course/ is generated from them."""

import re
from pathlib import Path

import nbformat
import pytest

from crashlab.grading.build import MAY_RAISE_TAG, USES_ANSWERS_TAG, out_of_date, student_version
from crashlab.course.metadata import lesson_meta, unknown_keys
from crashlab.course.notebooks import grade_id, is_answer_cell, is_test_cell, nbgrader_meta, written_files

ROOT = Path(__file__).resolve().parents[2]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))
GRADE_ID = re.compile(r"^[a-zA-Z0-9_\-]+$")


def test_there_are_masters():
    assert MASTERS, "solutions/ has no master notebooks"


def test_course_is_up_to_date_with_solutions():
    stale = out_of_date()
    assert stale == [], f"course/ is out of date, run `crashlab build`: {stale}"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_master_metadata_follows_nbgrader_schema_v3(master):
    nb = nbformat.read(master, as_version=4)
    ids = [grade_id(c) for c in nb.cells if grade_id(c)]
    assert len(ids) == len(set(ids)), f"duplicate grade ids in {master.name}"
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if not meta:
            continue
        assert meta["schema_version"] == 3
        assert {"grade", "solution", "locked", "grade_id"} <= set(meta)
        assert set(meta) <= {"schema_version", "grade", "solution", "locked", "grade_id", "points"}
        assert GRADE_ID.match(meta["grade_id"])
        if meta["grade"]:
            assert meta["points"] > 0
        if is_answer_cell(cell):
            assert "# BEGIN SOLUTION" in cell.source and "# END SOLUTION" in cell.source
        if is_test_cell(cell):
            assert meta["locked"], "test cells must be locked"
        assert "### BEGIN" not in cell.source, "use single-hash markers"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_master_has_three_exercises_with_hidden_checks_and_matrix_checks(master):
    nb = nbformat.read(master, as_version=4)
    tests = [c for c in nb.cells if is_test_cell(c)]
    assert len(tests) >= 3
    for cell in tests:
        assert "# BEGIN HIDDEN TESTS" in cell.source, f"{grade_id(cell)} has no hidden checks"
        visible = cell.source.split("# BEGIN HIDDEN TESTS")[0]
        assert "assert" in visible, f"{grade_id(cell)} has no visible checks"
    checks = nb.metadata["crashlab"].get("matrix_checks", [])
    files = written_files(nb)
    for check in checks:
        assert check["agent"] in files, f"matrix check {check['name']} names {check['agent']}, which no cell writes"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_master_is_executed_with_outputs(master):
    nb = nbformat.read(master, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "masters are committed executed: run `make execute`"
    assert not [c for c in code if any(o.output_type == "error" for o in c.outputs)], "a master cell raised"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_student_version_hides_answers_and_hidden_checks(master):
    nb = nbformat.read(master, as_version=4)
    student = student_version(nb)
    text = "\n".join(c.source for c in student.cells)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    for m_cell, s_cell in zip(nb.cells, student.cells):
        if s_cell.cell_type == "code":
            assert s_cell.outputs == [] and s_cell.execution_count is None
        if is_answer_cell(m_cell):
            solution = m_cell.source.split("# BEGIN SOLUTION")[1].split("# END SOLUTION")[0]
            body = [line.strip() for line in solution.splitlines() if len(line.strip()) > 25]
            assert not any(line in s_cell.source for line in body), f"{grade_id(m_cell)} leaks its solution"
            assert "raise NotImplementedError()" in s_cell.source
            assert MAY_RAISE_TAG in s_cell.metadata.get("tags", [])
        if is_test_cell(m_cell):
            assert s_cell.metadata.get("editable") is False and s_cell.metadata.get("deletable") is False


def test_classroom_workflow_is_generated_from_the_masters():
    from crashlab.grading.classroom import workflow

    committed = (ROOT / ".github" / "workflows" / "classroom.yml").read_text()
    assert committed == workflow(), "run `crashlab classroom > .github/workflows/classroom.yml`"
    for master in MASTERS:
        assert f"course/{master.name}" in committed


def test_result_command_exit_codes(tmp_path):
    import json
    import subprocess
    import sys

    results = tmp_path / "r.json"
    results.write_text(json.dumps({"score": 3, "max_score": 5, "tests": [
        {"name": "a", "score": 3, "max_score": 3, "output": "passed"},
        {"name": "b", "score": 0, "max_score": 2, "output": "AssertionError"}]}))
    run = lambda name: subprocess.run([sys.executable, "-m", "crashlab.cli", "result", str(results), "--test", name],
                                      capture_output=True, text=True, timeout=60).returncode
    assert (run("a"), run("b"), run("missing")) == (0, 1, 2)


AGENT_FILE = re.compile(r'"(\w+\.py)"')
# What sets a scene apart from a plain run: a world fault it injects, a variable it gives the agent.
CONDITION = re.compile(r'inject\("(\w+)"|"([A-Z][A-Z0-9_]{2,})"')


def _conditions(source: str) -> set[str]:
    return {fault or name for fault, name in CONDITION.findall(source)}


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_nbval_skips_only_what_the_grading_tests_run_on_the_master(master):
    """nbval over the masters skips a cell only when the grading tests run the same on the master
    (tests/grading/test_grading_all.py runs every check and matrix check there): a crash matrix of an agent that the
    lesson's matrix checks grade (named in the cell, or through a name an earlier cell bound to agent files), a
    scene that one of the lesson's graded checks plays too (an agent the check runs, under a world fault or a
    variable the check sets), or a cell that only prints or plots what such a matrix produced. A graded test cell
    may be skipped too, and without being skipped when grading: test_master_scores_full_marks runs every test cell
    on the master (visible and hidden checks), so full marks already prove it passes there and nbval running it
    again would prove nothing new. The cells after it must then run without it (no name it binds, and
    ``needs_exercise`` told the answer's file). Anything else a master does, nbval runs."""
    nb = nbformat.read(master, as_version=4)
    graded_agents = {check["agent"] for check in nb.metadata.get("crashlab", {}).get("matrix_checks", [])}
    checks = [c.source for c in nb.cells if c.cell_type == "code" and is_test_cell(c)]
    bound: dict[str, set[str]] = {}  # a name an earlier cell bound to agent files (DURABLE = {"Temporal": ...})
    produced: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if "nbval-skip" not in cell.metadata.get("tags", []) or is_test_cell(cell):
            for name, value in re.findall(r"^([A-Z_]+) = (.*)$", cell.source, re.M):
                if AGENT_FILE.search(value):
                    bound[name] = set(AGENT_FILE.findall(value))
            continue
        assert "skip-when-grading" in cell.metadata.get("tags", []), f"{master.name}: {cell.source[:80]!r}"
        names = set(re.findall(r"\b(\w+)\b", cell.source))
        if "crash_test(" in cell.source:
            runs = set(re.findall(r'crash_test\("([^"]+)"', cell.source)).union(
                *(bound[name] for name in names & set(bound)))
            assert runs and runs <= graded_agents, f"{master.name}: nbval skips a matrix no grading test runs: " \
                                                   f"{runs or cell.source[:80]!r}"
            produced |= set(re.findall(r"^(\w+) = (?:\{.*)?crash_test\(", cell.source, re.M))
            continue
        agents, conditions = set(AGENT_FILE.findall(cell.source)), _conditions(cell.source)
        replayed = agents and conditions and any(agents & set(AGENT_FILE.findall(check))
                                                  and conditions & _conditions(check) for check in checks)
        assert replayed or names & produced, \
            f"{master.name}: nbval skips a cell that is not about a graded matrix or a scene a check plays: " \
            f"{cell.source[:80]!r}"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_student_notebooks_carry_nbval_markers_as_tags_not_in_the_code(master):
    student = student_version(nbformat.read(master, as_version=4))
    master_nb = nbformat.read(master, as_version=4)
    marked = [c for c in master_nb.cells if c.cell_type == "code" and "# NBVAL_IGNORE_OUTPUT" in c.source.split("\n")]
    assert not any("NBVAL_" in c.source for c in student.cells if c.cell_type == "code")
    tagged = [c for c in student.cells if "nbval-ignore-output" in c.metadata.get("tags", [])]
    assert len(tagged) >= len(marked)


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.name)
def test_student_notebooks_carry_no_saved_widget_state(master):
    """The masters' progress bars are widgets whose state the master saves; the student notebook has no
    outputs for it to describe."""
    assert "widgets" not in student_version(nbformat.read(master, as_version=4)).metadata


@pytest.mark.parametrize("master", sorted((ROOT / "solutions").glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_masters_metadata_names_only_the_keys_the_course_reads(master):
    """A key no type names is one nothing reads: a typo (``resumer``) would silently grade another matrix."""
    meta = lesson_meta(nbformat.read(master, as_version=4))
    assert meta.get("lesson") and meta.get("title"), master.name
    assert unknown_keys(meta) == [], f"{master.name}: keys nothing reads: {unknown_keys(meta)}"


@pytest.mark.parametrize("master", sorted((ROOT / "solutions").glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_demonstration_that_runs_an_answer_is_tagged_so(master):
    """A cell that calls ``needs_exercise`` stops with one line in an unanswered notebook; tagged ``uses-answers``,
    the build marks it as raising, so Run All goes on past it (in Lab and under nbval)."""
    untagged = [i for i, cell in enumerate(nbformat.read(master, as_version=4).cells)
                if cell.cell_type == "code" and "needs_exercise(" in cell.source and not is_answer_cell(cell)
                and not is_test_cell(cell) and USES_ANSWERS_TAG not in cell.metadata.get("tags", [])]
    assert not untagged, f"{master.name}: cells {untagged} run an answer but are not tagged {USES_ANSWERS_TAG!r}"
