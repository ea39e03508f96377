"""One feedback file per student, for an instructor to hand back: ``DIR/graded/STUDENT/feedback.md``, beside the
results ``crashlab grade-batch`` keeps there.

The results are JSON for the gradebook and for a batch run again; a student reads this instead. Markdown that
reads as plain text too: the student's total, then per lesson a table of the exercises with their points, and
under it, for each exercise short of full marks, the grader's feedback as it was written (in a fenced block, so
nothing in it turns into markup). A lesson that could not be graded says why; a lesson not submitted says so.
Rebuilt from the results at the end of every complete run, as the gradebook is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from crashlab.grading.classroom import exercises
from crashlab.plumbing.outputs import Kind, write_output

if TYPE_CHECKING:
    from crashlab.grading.batch import Batch, Submission

FILE_NAME = "feedback.md"
TITLE = "# Feedback for "
FEEDBACK = Kind("a student's feedback page", lambda path: path.read_text(errors="replace").startswith(TITLE))


def _fenced(text: str) -> list[str]:
    """``text`` in a fenced block whose fence is longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, text.rstrip(), fence]


def _points(value: float) -> str:
    return f"{value:g}"


def _lesson(master: Path, sub: Submission | None) -> tuple[list[str], float, float]:
    """One lesson's part of the page, its score and its maximum."""
    maximum = float(sum(points for _, points in exercises(master)))
    head = f"## {master.stem}"
    if sub is None:
        return [f"{head}: not submitted (0 / {_points(maximum)})", ""], 0.0, maximum
    if sub.failed or sub.result is None:
        return [f"{head}: not graded yet", "", "The grading did not finish (not because of your notebook); your "
                "instructor runs it again.", ""], 0.0, maximum
    if "error" in sub.result:
        return [f"{head}: 0 / {_points(maximum)}", "", f"`{sub.path.name}` could not be graded: {sub.result['error']}",
                ""], 0.0, maximum
    tests = {t.get("name"): t for t in sub.result.get("tests", []) if isinstance(t, dict)}
    score = sum(float(tests.get(name, {}).get("score", 0)) for name, _ in exercises(master))
    lines = [f"{head}: {_points(score)} / {_points(maximum)}", "", f"Graded: `{sub.path.name}`.", "",
             "| exercise | points | out of |", "|---|---:|---:|"]
    short = []
    for name, points in exercises(master):
        got = float(tests.get(name, {}).get("score", 0))
        lines.append(f"| {name} | {_points(got)} | {points} |")
        if got < points:
            short.append((name, got, points, str(tests.get(name, {}).get("output") or "no result for this exercise")))
    lines.append("")
    for name, got, points, output in short:
        lines += [f"### {name}: {_points(got)} / {points}", "", *_fenced(output), ""]
    return lines, score, maximum


def student_page(batch: Batch, student: str, masters: list[Path]) -> str:
    """The page of one student: every lesson anyone in the batch submitted, in the masters' order."""
    subs = {sub.master: sub for sub in batch.students[student]}
    parts, total, maximum = [], 0.0, 0.0
    for master in masters:
        lines, score, most = _lesson(master, subs.get(master))
        parts += lines
        total, maximum = total + score, maximum + most
    notes = [note for note in batch.notes.get(student, []) if note]
    head = [f"{TITLE}{student}", "", f"**Total: {_points(total)} / {_points(maximum)}**", ""]
    if notes:
        head += ["Notes:", "", *[f"- {note}" for note in notes], ""]
    return "\n".join(head + parts).rstrip() + "\n"


def write_feedback(batch: Batch, results_dir: Path) -> list[Path]:
    """Write each student's page beside their results; the paths written."""
    masters = sorted({sub.master for sub in batch.submissions})
    written = []
    for student in sorted(batch.students):
        target = results_dir / "graded" / student / FILE_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        write_output(target, student_page(batch, student, masters), FEEDBACK, force=True, mode=0o600)
        written.append(target)
    return written


__all__ = ["FILE_NAME", "student_page", "write_feedback"]
