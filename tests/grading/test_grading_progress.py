"""A grading says what it is doing while it waits: the notebook's cells as the student's kernel reaches them."""

from __future__ import annotations

import nbformat

from crashlab.grading.isolation import Deadline, Isolation, run_submission


def test_the_grader_is_told_each_cell_as_the_students_kernel_starts_it(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("# x"),
                                         nbformat.v4.new_code_cell("print(x)")])
    told: list[tuple[int, int]] = []
    (tmp_path / "work").mkdir()
    isolation = Isolation(tmp_path / "work", False, hide=())
    try:
        notes = run_submission(nb, isolation, Deadline(300), 120, on_cell=lambda i, n: told.append((i, n)))
    finally:
        isolation.close()
    assert notes == [] and told == [(1, 3), (2, 3), (3, 3)], (notes, told)
