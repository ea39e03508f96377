"""A two-exercise course in nbgrader's format, graded in seconds: for the tests of the machinery around the
grader (batches, resuming, the benchmark, the self-check), where a real lesson would only add minutes."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from crashlab.grading.build import student_version

NAME = "90_tiny.ipynb"


def _meta(gid: str, *, grade: bool, solution: bool, points: int | None = None) -> dict:
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": not solution, "grade_id": gid}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def master() -> nbformat.NotebookNode:
    nb = new_notebook(metadata={"crashlab": {"lesson": "90", "title": "Tiny"},
                                "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# Tiny\n\nExercise 1: `double(x)` returns twice x. Exercise 2: `half(x)` returns half of x."),
        new_code_cell("%%writefile tiny.py\ndef double(x):\n    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION\n",
                      metadata=_meta("ex1_double", grade=False, solution=True)),
        new_code_cell('# Exercise 1: visible checks\nimport importlib\nimport tiny\nimportlib.reload(tiny)\n'
                      '# [R1] twice x -- text: "returns twice x"\nassert tiny.double(2) == 4\n'
                      "# BEGIN HIDDEN TESTS\nassert tiny.double(-3) == -6\n# END HIDDEN TESTS\n",
                      metadata=_meta("ex1_double_checks", grade=True, solution=False, points=2)),
        new_code_cell("%%writefile halves.py\ndef half(x):\n    # BEGIN SOLUTION\n    return x / 2\n    # END SOLUTION\n",
                      metadata=_meta("ex2_half", grade=False, solution=True)),
        new_code_cell('# Exercise 2: visible checks\nimport importlib\nimport halves\nimportlib.reload(halves)\n'
                      '# [R1] half of x -- text: "returns half of x"\nassert halves.half(4) == 2\n'
                      "# BEGIN HIDDEN TESTS\nassert halves.half(3) == 1.5\n# END HIDDEN TESTS\n",
                      metadata=_meta("ex2_half_checks", grade=True, solution=False, points=3)),
    ]
    return nb


def wrong() -> nbformat.NotebookNode:
    """Exercise 1 right, exercise 2 right on the visible check only (integer division)."""
    nb = master()
    nb.cells[3].source = "%%writefile halves.py\ndef half(x):\n    return x // 2\n"
    return nb


def write_course(root: Path) -> Path:
    """``root/solutions/90_tiny.ipynb``; returns the solutions folder."""
    solutions = root / "solutions"
    solutions.mkdir(parents=True)
    nbformat.write(master(), solutions / NAME)
    return solutions


def stub() -> nbformat.NotebookNode:
    return student_version(master())
