"""How `make test` spreads tests/ over its two workers (pytest-xdist, ``--dist load``): the longest tests go
first. Each runs whole on one worker, so one that starts last keeps that worker busy while the other has nothing left
to do; started first, the short ones fill in around it.
"""

from __future__ import annotations

# The slowest in CI (`make test` prints them), longest first; anything not named here is short.
LONGEST_FIRST = [
    "test_grading_all.py::test_master_scores_full_marks", "test_browser.py::test_lab_runs",
    "test_autograder.py::test_gradescope_setup", "test_grading_all.py::test_student_notebook_scores_zero",
    "test_lesson02.py::test_read_check_write", "test_redteam.py", "test_release.py", "test_batch.py",
]


def _rank(item) -> int:
    nodeid = item.nodeid.replace("\\", "/")
    return next((k for k, key in enumerate(LONGEST_FIRST) if key in nodeid), len(LONGEST_FIRST))


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: within a rank, and for every notebook's cells, the collected order stays
