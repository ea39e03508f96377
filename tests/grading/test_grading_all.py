"""Every master scores full marks and every generated student notebook scores zero, with feedback a learner can
act on: each message names what is missing in the student's own terms, never a grader's folder or frame, never an
empty exception, never a word cut in half."""

import re
from pathlib import Path

import pytest

from crashlab.grading.grade import grade_notebook

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


# What a message of the grader's own must never show: its folders, its modules' or importlib's frames, an
# exception with nothing after the colon.
INTERNALS = re.compile(r"crashlab-(grade|rows|private)-|subject\.py|judge\.py|<frozen |_bootstrap|"
                       r"NotImplementedError:\s*(\(|$)")


def assert_feedback_without_internals(output: str) -> None:
    assert output.strip(), "an exercise with no feedback at all"
    found = INTERNALS.search(output)
    assert found is None, f"{found.group(0)!r} in: {output}"
