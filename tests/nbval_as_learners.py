"""nbval runs each master's cells as the learner's notebook has them: without the hidden checks.

A master's check cells hold the visible checks a learner runs and, between ``# BEGIN HIDDEN TESTS`` and ``# END
HIDDEN TESTS``, the grader's hidden ones, which nbgrader removes from the student notebook. The hidden checks are the
grader's: ``tests/grading/test_grading_all.py`` grades every master and fails on any check that does not pass, so
running them again under nbval proves nothing more (the heaviest check cells are ``nbval-skip`` already, so this
saves little time). What it buys is the learner's view: nbval runs what a learner runs, answers in place, and a
demonstration that leaned on a name only a hidden check defines would fail here, as it would in the learner's Run All.

What nbval compares is unchanged where it matters: a check cell's own line ("exercise N: the visible checks
passed") is printed by the visible part; the progress lines a hidden check's waits added are among the volatile
lines the sanitizers drop.
"""

from __future__ import annotations

from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"


def strip_hidden_checks(items) -> int:
    """Remove the hidden checks from the source of every nbval cell of a master, in place; how many cells had some."""
    from crashlab.grading.build import without_hidden_checks
    from crashlab.grading.judge import HIDDEN_BEGIN

    stripped = 0
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None or Path(str(item.fspath)).parent != SOLUTIONS or HIDDEN_BEGIN not in cell.get("source", ""):
            continue
        cell.source = without_hidden_checks(cell).source
        stripped += 1
    return stripped
