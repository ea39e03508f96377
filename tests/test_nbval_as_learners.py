"""nbval's cells of a master run without the hidden checks (see :mod:`nbval_as_learners`); nothing else is touched."""

from __future__ import annotations

from types import SimpleNamespace

import nbformat

from nbval_as_learners import SOLUTIONS, strip_hidden_checks

CHECK = ("# Exercise 1: visible checks\nassert visible()\n# BEGIN HIDDEN TESTS\nassert hidden()\n"
         "# END HIDDEN TESTS\nprint('after')")


def item(folder, source):
    grade = {"nbgrader": {"grade": True, "grade_id": "ex1_check", "points": 1, "solution": False, "locked": True}}
    return SimpleNamespace(fspath=folder / "01_x.ipynb", cell=nbformat.v4.new_code_cell(source, metadata=grade))


def test_a_masters_check_cell_loses_its_hidden_checks_and_keeps_the_rest(tmp_path):
    master, elsewhere, plain = item(SOLUTIONS, CHECK), item(tmp_path, CHECK), item(SOLUTIONS, "# NBVAL_IGNORE_OUTPUT\nx = 1")
    other = SimpleNamespace(fspath=SOLUTIONS / "01_x.ipynb")  # not a notebook cell: an ordinary test item
    assert strip_hidden_checks([master, elsewhere, plain, other]) == 1
    assert master.cell.source == "# Exercise 1: visible checks\nassert visible()\nprint('after')"
    assert elsewhere.cell.source == CHECK and plain.cell.source == "# NBVAL_IGNORE_OUTPUT\nx = 1"


def test_every_masters_hidden_checks_come_out_whole():
    """Each master's check cells, stripped: no hidden line left, every visible line kept, and still Python."""
    import ast

    from crashlab.grading.judge import HIDDEN_BEGIN, hidden_lines

    cells = [cell for path in sorted(SOLUTIONS.glob("*.ipynb")) for cell in nbformat.read(path, as_version=4).cells
             if cell.cell_type == "code" and HIDDEN_BEGIN in cell.source]
    assert cells, "the masters have hidden checks"
    items = [SimpleNamespace(fspath=SOLUTIONS / "x.ipynb", cell=nbformat.from_dict(dict(cell))) for cell in cells]
    assert strip_hidden_checks(items) == len(cells)
    for cell, stripped in zip(cells, items):
        hidden = hidden_lines(cell.source)
        kept = [line for n, line in enumerate(cell.source.splitlines(), start=1) if n not in hidden]
        assert stripped.cell.source.splitlines() == kept
        ast.parse(stripped.cell.source)
