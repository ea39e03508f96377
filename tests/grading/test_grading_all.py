"""Every master scores full marks and every generated student notebook scores zero, with feedback a learner can
act on: each message says first that the exercise is not answered yet and names what is missing in the student's
own terms, never a grader's folder or frame, never an empty exception, never a word cut in half."""

from pathlib import Path

import pytest

from crashlab.grading.grade import grade_notebook
from feedback_guard import feedback_problems

ROOT = Path(__file__).resolve().parents[2]
# Lesson 1 has its own, more detailed proofs in test_grading.py.
MASTERS = sorted(p for p in (ROOT / "solutions").glob("*.ipynb") if not p.name.startswith("01_"))


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_master_scores_full_marks(master):
    report = grade_notebook(master)
    assert report.max_score > 0
    assert report.score == report.max_score, str(report)


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_student_notebook_scores_zero(master):
    report = grade_notebook(ROOT / "course" / master.name)
    assert report.score == 0, str(report)
    for test in report.tests:
        assert_feedback_without_internals(test.output)
        # The cause first, in every lesson alike: nothing is answered yet, and where the placeholder is.
        assert test.output.startswith("not answered yet"), f"{test.name}: {test.output}"


def assert_feedback_without_internals(output: str) -> None:
    problems = feedback_problems(output)
    assert not problems, f"{'; '.join(problems)} in: {output}"
