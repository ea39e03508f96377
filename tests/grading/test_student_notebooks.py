"""Run All on each unanswered student notebook, as a learner does before writing a line; then, in the same
kernel, the first exercise answered and its visible checks run again, as a learner does next.

What a learner must see: every cell that runs their answers stops at once with one line naming the
exercise to finish (no waits on agents that cannot work, no engine's traceback, no result of a run that
never happened), and every other error comes from an exercise's own cell. Then a visible check, run on
the placeholder first, sees the answer once it is written: no kernel restart. One check a lesson shows
that in the lesson's own kernel; every check passing on the answers is the masters' grading, and the
mechanism at every kind of answer (a file, the same file rewritten in the same second, a module outside
the lesson) is ``test_a_visible_check_sees_the_answer_written_after_it_ran``. The long demonstrations
of given code (tagged ``skip-when-grading`` and not ``uses-answers``) are left out: nbval runs them in full
over the masters. The browser test runs the unanswered lesson 5 in JupyterLab the same way, to see what Lab
shows of it.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from crashlab.course.notebooks import QUIET_KERNEL, grade_id, is_answer_cell, is_test_cell
from crashlab.lessons.notebook import NOT_ANSWERED_CELL, VISIBLE_CHECK

ROOT = Path(__file__).resolve().parents[2]
PASSED = "the visible checks passed"
STUDENT_NOTEBOOKS = sorted((ROOT / "course").glob("*.ipynb"))
CELL_TIMEOUT_S = 120  # a cell that hangs fails here; how long the whole Run All takes is printed, not judged


def tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def given_demonstration(cell) -> bool:
    return "skip-when-grading" in tags(cell) and "uses-answers" not in tags(cell)


def answering(nb: nbformat.NotebookNode, master: nbformat.NotebookNode) -> list[tuple[int, list]]:
    """What a learner does after Run All, exercise by exercise: the master's answer cells written over the
    placeholders that come before a visible check (and after the one before it), then that check again, in the
    same kernel. ``(index of the check in nb, [the answer cells..., the check again])`` per visible check."""
    answers = {grade_id(cell): cell for cell in master.cells if cell.cell_type == "code" and is_answer_cell(cell)}
    steps, pending = [], []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if is_answer_cell(cell):
            pending.append(nbformat.v4.new_code_cell(answers[grade_id(cell)].source))
        elif VISIBLE_CHECK.match(cell.source):
            again = nbformat.v4.new_code_cell(cell.source, metadata={"tags": ["raises-exception"]})
            steps.append((index, [*pending, again]))
            pending = []
    return steps


def run_all(path: Path, workdir: Path, then: list | None = None) -> tuple[nbformat.NotebookNode, float]:
    """Run All (the given demonstrations left out), with ``then`` run in the same kernel before the lesson's last
    cell, which stops what the lesson started (``stop_worlds()``, its launchers and servers)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and given_demonstration(cell):
            cell.source = "pass  # a given demonstration: nbval runs it over the master"
    if then:
        last = max(index for index, cell in enumerate(nb.cells) if cell.cell_type == "code")
        assert "stop_worlds()" in nb.cells[last].source, f"{path.name} should end by stopping its worlds"
        nb.cells[last:last] = then
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", extra_arguments=QUIET_KERNEL,
                            resources={"metadata": {"path": str(workdir)}})
    started = time.monotonic()
    client.execute(cwd=str(workdir))  # an error outside a raises-exception cell fails here, as under nbval-lax
    return nb, time.monotonic() - started


def said(cell) -> str:
    return "".join(o.get("text", "") if o.get("output_type") == "stream" else
                   f"{o.get('ename')}: {o.get('evalue')}\n" if o.get("output_type") == "error" else ""
                   for o in cell.get("outputs", []))


@pytest.mark.parametrize("path", STUDENT_NOTEBOOKS, ids=lambda p: p.stem)
def test_run_all_on_an_unanswered_notebook_stops_each_demonstration_in_one_line(path, tmp_path):
    """And then the first visible check, run on the placeholder by Run All, sees its exercise's answer."""
    steps = answering(nbformat.read(path, as_version=4), nbformat.read(ROOT / "solutions" / path.name, as_version=4))
    answered = steps[:1]  # the module's docstring says why one check a lesson
    nb, seconds = run_all(path, tmp_path, then=[cell for _, cells in answered for cell in cells])
    print(f"{path.name}: Run All (given demonstrations left out), then the first exercise answered and checked again, "
          f"in {seconds:.1f} s")
    for check, _ in steps:  # each check ran on the placeholder, as the learner's first try
        where = f"{path.name}: {nb.cells[check].source.splitlines()[0]!r}"
        assert PASSED not in said(nb.cells[check]), f"{where} passed on the placeholder"
        assert said(nb.cells[check]).strip(), f"{where} said nothing on the placeholder"
    for check, cells in answered:  # and the first again, once its exercise is answered
        where = f"{path.name}: {nb.cells[check].source.splitlines()[0]!r}"
        again = cells[-1]  # executed in place, at the end of nb
        assert PASSED in said(again) and "error" not in [o.get("output_type") for o in again.outputs], \
            f"{where}, run again once the exercise is answered in the same kernel, did not pass:\n{said(again)[-1500:]}"
    added = {id(cell) for _, cells in answered for cell in cells}
    for index, cell in enumerate(nb.cells):
        if id(cell) in added:
            continue
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        where = f"{path.name} cell {index}: {cell.source[:60]!r}"
        if "uses-answers" in tags(cell) and not cell.source.startswith("%%"):
            assert [e["ename"] for e in errors] == ["FinishExerciseFirst"], f"{where} ran without the answers: {errors}"
            assert len(errors[0]["traceback"]) == 1 and "exercise" in errors[0]["evalue"], where
            assert not [o for o in cell.outputs if o.get("output_type") != "error"], f"{where} printed before stopping"
        elif errors:
            assert is_answer_cell(cell) or is_test_cell(cell) or "raises-exception" in tags(cell), where
        if VISIBLE_CHECK.match(cell.source) and errors:  # one line (and the check's line), never a traceback
            assert len(errors) == 1 and len(errors[0]["traceback"]) <= 2, f"{where}: {errors[0]['traceback']}"
            assert "Traceback" not in "".join(errors[0]["traceback"]), f"{where}: {errors[0]['traceback']}"
    # nothing of the lesson's writing lands beside the notebook: it goes into the lesson's folder
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [path.stem]


def test_a_demonstration_runs_once_its_exercise_passed_and_not_before(tmp_path):
    """The guard itself, in a real kernel: failing checks, then passing checks, then a file still a stub; and
    what the checks say: a placeholder's NotImplementedError in one line, a pass in one line."""
    cells = ["from crashlab.lessons.notebook import needs_exercise",
             "# Exercise 1: visible checks\nassert False, 'not yet'",
             "needs_exercise(1)\nprint('ran')",
             "# Exercise 1: visible checks\nassert True",
             "needs_exercise(1)\nprint('ran')",
             "_ = open('stub.py', 'w').write('def f():\\n    # YOUR CODE HERE\\n    raise NotImplementedError()\\n')",
             "needs_exercise(2, written='stub.py')",
             "_ = open('stub.py', 'w').write('def f():\\n    return 1\\n')",
             "needs_exercise(2, written='stub.py')\nprint('ran 2')",
             "def undo_key(order_id):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
             "# Exercise 3: visible checks\nassert undo_key('ORD-1')",
             "undo_key('ORD-1')",
             "my_answers = {}\n# YOUR CODE HERE\nraise NotImplementedError()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True, extra_arguments=QUIET_KERNEL,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(cwd=str(tmp_path))
    said = [(o.get("ename") or o.get("text", "").strip()) for c in nb.cells for o in c.outputs]
    passed = "exercise 1: the visible checks passed (grading also runs hidden checks)"
    assert said == ["AssertionError", "FinishExerciseFirst", passed, "ran", "FinishExerciseFirst", "ran 2",
                    "NotImplementedError", "NotImplementedError", "NotImplementedError"], said
    assert nb.cells[10].outputs[0]["traceback"] == ["exercise 3 not answered yet: `undo_key` raises NotImplementedError"]
    assert len(nb.cells[11].outputs[0]["traceback"]) > 1, "outside a check it is an ordinary traceback"
    # an answer cell run as given (its placeholder at the top level): one line that says so, not a bare traceback
    assert nb.cells[12].outputs[0]["traceback"] == [NOT_ANSWERED_CELL]
    assert "did not pass yet" in nb.cells[2].outputs[0]["evalue"]
    # a failed check shows its message and its line, not the frames of helpers in between
    assert nb.cells[1].outputs[0]["traceback"] == ["AssertionError: not yet",
                                                 "  (exercise 1's visible checks, the cell's line 2: assert False, 'not yet')"]
    assert "stub.py line 3 still has the placeholder" in nb.cells[6].outputs[0]["evalue"]  # the line that raises


def test_the_lesson_folder_is_beside_the_notebook_however_often_the_cell_runs(tmp_path):
    cells = ["from crashlab.lessons.notebook import work_in_lesson_folder",
             "work_in_lesson_folder('07_x')\nwork_in_lesson_folder('07_x')\nimport os\nprint(os.getcwd())"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=60, kernel_name="python3", extra_arguments=QUIET_KERNEL,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(cwd=str(tmp_path))
    assert nb.cells[1].outputs[-1]["text"].strip().endswith(str(tmp_path / "07_x"))



def test_a_visible_check_sees_the_answer_written_after_it_ran(tmp_path):
    """The mechanism itself, in a real kernel: a check that imported the placeholder (``from answer import ...``, no
    reload) sees the answer written after it, even one of the same size in the same second (a compiled copy whose
    source's size and whole-second time still match); a module outside the lesson's folder stays imported."""
    placeholder = "def value():\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    answer = "def value():\n    # YOUR CODE HERE\n    return 'the answer as it is now'\n"
    same_size = "VALUE = 'a'\n", "VALUE = 'b'\n"
    cells = ["import crashlab.lessons.notebook, os, sys\nsys.dont_write_bytecode = False  # as on most machines",
             f"open('answer.py', 'w').write({placeholder!r}); open('same.py', 'w').write({same_size[0]!r})",
             "# Exercise 1: visible checks\nfrom answer import value\nassert value()",
             f"open('answer.py', 'w').write({answer!r})",
             "# Exercise 1: visible checks\nfrom answer import value\nprint(value())",
             "# Exercise 2: visible checks\nimport same\nprint(same.VALUE)",
             f"st = os.stat('same.py'); open('same.py', 'w').write({same_size[1]!r})\n"
             "os.utime('same.py', ns=(st.st_atime_ns, st.st_mtime_ns))  # the same size, the same time",
             "# Exercise 2: visible checks\nimport same\nprint(same.VALUE)",
             "print(sys.modules['crashlab.lessons.notebook'] is crashlab.lessons.notebook)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True, extra_arguments=QUIET_KERNEL,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(cwd=str(tmp_path))
    assert nb.cells[2].outputs[0]["traceback"] == ["exercise 1 not answered yet: `value` raises NotImplementedError"]
    assert said(nb.cells[4]).splitlines() == ["the answer as it is now", "exercise 1: " + PASSED + " (grading also "
                                                                                               "runs hidden checks)"]
    assert said(nb.cells[5]).splitlines()[0] == "a" and said(nb.cells[7]).splitlines()[0] == "b"
    assert said(nb.cells[8]).strip() == "True"
