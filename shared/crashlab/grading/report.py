"""What grading produces: one result per check, the report, and the results file (Gradescope's shape)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.plumbing.outputs import RESULTS, write_output


class GradingError(CrashlabError, RuntimeError):
    """The file cannot be graded (not a notebook, not a course notebook). The message says why."""


@dataclass
class TestResult:
    name: str
    score: float
    max_score: float
    output: str
    kind: str  # 'cell' or 'matrix'

    def as_dict(self) -> dict:
        return {"name": self.name, "score": self.score, "max_score": self.max_score,
                "visibility": "visible", "output": self.output}


@dataclass
class GradeReport:
    notebook: str
    lesson: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    isolated: bool = False
    run_id: str = ""
    self_check: bool = False  # the learner's own check, never isolated (nothing in it is hidden from them)
    sealed: dict = field(default_factory=dict)  # which of the box's seals held (crashlab.grading.isolation)
    peak: dict = field(default_factory=dict)  # the most the student's processes took together (tasks, memory bytes)

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 2)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 2)

    def as_dict(self) -> dict:
        return {"score": self.score, "max_score": self.max_score, "output": "\n".join(self.notes),
                "execution_time": round(self.seconds, 1), "isolated": self.isolated, "sealed": self.sealed,
                "peak": self.peak, "run_id": self.run_id,
                "notebook": self.notebook, "lesson": self.lesson, "tests": [t.as_dict() for t in self.tests]}

    def table(self, width: int = 100) -> str:
        """One row per check; the first line of its feedback wrapped whole in the last column (the rest of
        a failing check's feedback follows the table)."""
        import textwrap

        rows = [(t.name, f"{t.score:g}", f"{t.max_score:g}", (t.output.splitlines() or ["passed"])[0])
                for t in self.tests]
        header = ("exercise", "score", "max", "feedback")
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
        indent = sum(widths) + 6
        feedback_width = max(30, width - indent)
        lines = [f"{header[0]:<{widths[0]}}  {header[1]:>{widths[1]}}  {header[2]:>{widths[2]}}  {header[3]}"]
        lines.append("-" * (indent + feedback_width))
        for name, score, max_score, feedback in rows:
            wrapped = textwrap.wrap(feedback, feedback_width, break_on_hyphens=False) or [""]
            lines.append(f"{name:<{widths[0]}}  {score:>{widths[1]}}  {max_score:>{widths[2]}}  {wrapped[0]}")
            lines += [" " * indent + more for more in wrapped[1:]]
        lines.append(f"{'total':<{widths[0]}}  {self.score:>{widths[1]}g}  {self.max_score:>{widths[2]}g}")
        if self.isolated:
            missing = [name for name, held in self.sealed.items() if not held]
            isolated = "yes" + (f" (without its own {', '.join(missing)}: see the notes)" if missing else "")
        elif self.self_check:
            isolated = "no (a self-check runs your code as you)"
        elif os.geteuid() == 0:
            isolated = "no (isolation was not asked for: student code ran as you)"
        else:
            isolated = "no (not graded as root: student code ran as you)"
        lines.append(f"isolated: {isolated}")
        return "\n".join(lines)

    def __str__(self) -> str:
        text = f"{self.notebook} (lesson {self.lesson})\n{self.table()}"
        failed = [t for t in self.tests if t.score < t.max_score]
        for test in failed:
            text += f"\n\n[{test.name}] {test.score:g}/{test.max_score:g}\n{test.output}"
        if self.notes:
            text += "\n\nnotes:\n" + "\n".join(f"- {n}" for n in self.notes)
        return text


def without_grader_paths(text: str, folders: dict[str, str]) -> str:
    """``text`` with each of the grader's folders (``folders``: path -> what to call it) written as its name:
    feedback names a file the way the student knows it (``order_log.py``, not ``/tmp/crashlab-grade-x1/order_log.py``)
    and says nothing of where the grader keeps its own."""
    for path, name in sorted(folders.items(), key=lambda item: -len(item[0])):  # the deepest first
        path = re.escape(path.rstrip("/"))
        text = re.sub(path + "/", lambda _: name, text)
        text = re.sub(path + r"(?![\w-]|\.\w)", lambda _: name.rstrip("/") or ".", text)  # the folder itself
    return text


def write_results(report: GradeReport, target: Path, *, force: bool = False) -> None:
    """Atomically: a reader sees the old file or the whole new one, never a half-written one. An existing
    file that is not a results file (a notebook, a master) is refused (:mod:`crashlab.plumbing.outputs`) unless ``force``."""
    write_output(target, json.dumps(report.as_dict(), indent=2) + "\n", RESULTS, force=force)
