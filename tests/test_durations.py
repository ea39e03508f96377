"""The suite's scheduler starts the longest units first, by the figures in tests/durations.json."""

from collections import OrderedDict

import durations
from conftest import NotebookScopeScheduling


def test_a_durations_report_adds_up_each_units_phases_and_a_notebooks_cells():
    report = """============================= slowest durations =============================
63.11s call     tests/grading/test_grading_all.py::test_master_scores_full_marks[08_frameworks]
1.50s setup    tests/grading/test_grading_all.py::test_master_scores_full_marks[08_frameworks]
53.10s call     solutions/11_side_by_side.ipynb::Cell 2
2.00s call     solutions/11_side_by_side.ipynb::Cell 8
0.40s call     tests/world/test_world.py::test_quick
"""
    assert durations.from_report(report) == {
        "solutions/11_side_by_side.ipynb": 55.1,
        "tests/grading/test_grading_all.py::test_master_scores_full_marks[08_frameworks]": 64.61}


class Node:
    def __init__(self, collection):
        self.collection, self.sent = collection, []

    def send_runtest_some(self, indexes):
        self.sent.append([self.collection[i] for i in indexes])


def test_the_scheduler_hands_out_the_longest_unit_first_an_unmeasured_test_among_the_short_and_a_new_notebook_early(monkeypatch):
    monkeypatch.setattr(durations, "load", lambda: {"tests/a.py::slow": 60.0, "solutions/01_x.ipynb": 30.0,
                                                    "tests/a.py::short": 1.5})
    collection = ["tests/a.py::short", "tests/a.py::new", "solutions/01_x.ipynb::Cell 0",
                  "solutions/01_x.ipynb::Cell 1", "tests/a.py::slow", "tests/a.py::tiny", "solutions/02_new.ipynb::Cell 0"]
    scheduler = NotebookScopeScheduling.__new__(NotebookScopeScheduling)  # no xdist session: only the queue matters
    scheduler.workqueue = OrderedDict()
    for nodeid in collection:
        scheduler.workqueue.setdefault(scheduler._split_scope(nodeid), {})[nodeid] = False
    node = Node(collection)
    scheduler.assigned_work, scheduler.registered_collections = {}, {node: collection}
    while scheduler.workqueue:
        scheduler._assign_work_unit(node)
    assert node.sent == [["tests/a.py::slow"], ["solutions/01_x.ipynb::Cell 0", "solutions/01_x.ipynb::Cell 1"],
                         ["solutions/02_new.ipynb::Cell 0"],  # not measured yet: as long as the longest notebook
                         ["tests/a.py::short"], ["tests/a.py::new"], ["tests/a.py::tiny"]]


def test_a_modules_tests_that_share_a_fixture_set_up_once_are_one_unit_expected_to_take_their_sum():
    """test_report.py renders its page once for its tests (a module-scoped fixture); test_grading_all.py's
    gradings share nothing and stay units of their own."""
    assert durations.unit_of("tests/report/test_report.py::test_a[x]") == "tests/report/test_report.py"
    graded = "tests/grading/test_grading_all.py::test_master_scores_full_marks[05_temporal]"
    assert durations.unit_of(graded) == graded
    assert durations.shares_fixtures("tests/lessons/test_compensation.py")  # its agents written once; a warm launcher
    figures = {"tests/report/test_report.py::test_a": 2.0, "tests/report/test_report.py::test_b[x]": 3.5,
               "tests/report/test_reporting.py::test_c": 9.0}
    assert durations.expected("tests/report/test_report.py", figures) == 5.5
    assert durations.expected("tests/report/test_report.py", {}) == durations.UNKNOWN
