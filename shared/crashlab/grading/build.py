"""Turn a master notebook into the student notebook, with nbgrader's preprocessors chained.

LockCells -> ClearSolutions -> ClearHiddenTests -> ClearOutput, then :class:`DropWidgetState` (the masters'
saved progress bars); :class:`MarkCellsThatMayRaise`, which tags every answer cell, test cell and cell marked
``uses-answers`` with ``raises-exception`` so that Run All goes on past them in the unanswered student
notebook: those cells raise until the learner answers;
:class:`SkipDemonstrationsInNbval`; and :class:`MoveNbvalMarkersToTags`, so no nbval comment sits in
the code learners read.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions, LockCells

from crashlab.grading.notebooks import is_answer_cell, is_test_cell, repo_root

MAY_RAISE_TAG = "raises-exception"
USES_ANSWERS_TAG = "uses-answers"
SKIP_WHEN_GRADING_TAG = "skip-when-grading"
NBVAL_SKIP_TAG = "nbval-skip"


class MarkCellsThatMayRaise(Preprocessor):
    """Tag the cells that raise in an unanswered notebook, so nbval --nbval-lax expects it."""

    def preprocess_cell(self, cell, resources, index):
        tags = cell.metadata.setdefault("tags", [])
        if cell.cell_type == "code" and (is_answer_cell(cell) or is_test_cell(cell) or USES_ANSWERS_TAG in tags):
            if MAY_RAISE_TAG not in tags:
                tags.append(MAY_RAISE_TAG)
        if not tags:
            del cell.metadata["tags"]
        return cell, resources


class SkipDemonstrationsInNbval(Preprocessor):
    """Long demonstrations (tagged ``skip-when-grading``) are checked in full by nbval over the masters;
    running them again over each student notebook would double the suite's time for no new check."""

    def preprocess_cell(self, cell, resources, index):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and SKIP_WHEN_GRADING_TAG in tags and NBVAL_SKIP_TAG not in tags:
            tags.append(NBVAL_SKIP_TAG)
        return cell, resources


class MoveNbvalMarkersToTags(Preprocessor):
    """nbval reads ``# NBVAL_IGNORE_OUTPUT`` (and its kin) from a comment line or from a cell tag. Learners
    read the code, not the tags: in the student notebook the comment becomes the tag."""

    MARKERS = {"# NBVAL_IGNORE_OUTPUT": "nbval-ignore-output", "# NBVAL_SKIP": "nbval-skip",
               "# NBVAL_CHECK_OUTPUT": "nbval-check-output", "# NBVAL_RAISES_EXCEPTION": "raises-exception"}

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        kept = []
        for line in cell.source.split("\n"):
            tag = self.MARKERS.get(line.strip())
            if tag is None:
                kept.append(line)
                continue
            tags = cell.metadata.setdefault("tags", [])
            if tag not in tags:
                tags.append(tag)
        cell.source = "\n".join(kept)
        return cell, resources


class DropWidgetState(Preprocessor):
    """A master saves the state of the widgets its outputs show (progress bars); with the outputs cleared it
    describes nothing, and it would make every student notebook tens of kilobytes larger."""

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return nb, resources


PIPELINE = (LockCells, ClearSolutions, ClearHiddenTests, ClearOutput, DropWidgetState, MarkCellsThatMayRaise,
            SkipDemonstrationsInNbval, MoveNbvalMarkersToTags)


def student_version(master: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student notebook for ``master``: answers and hidden checks removed, outputs cleared."""
    nb = copy.deepcopy(master)
    resources: dict = {}
    for step in PIPELINE:
        nb, resources = step().preprocess(nb, resources)
    return nb


def _serialise(nb) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def build_course(solutions: Path | None = None, course: Path | None = None, *, check: bool = False) -> list[Path]:
    """Regenerate ``course/`` from ``solutions/``. Returns the student notebooks that changed
    (with ``check``, the ones that are out of date, and nothing is written)."""
    root = repo_root()
    solutions = solutions or root / "solutions"
    course = course or root / "course"
    changed = []
    for master_path in sorted(solutions.glob("*.ipynb")):
        student = student_version(nbformat.read(master_path, as_version=4))
        nbformat.validate(student)
        text = _serialise(student)
        target = course / master_path.name
        if not target.exists() or target.read_text() != text:
            changed.append(target)
            if not check:
                course.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    if not check:
        masters = {p.name for p in solutions.glob("*.ipynb")}
        for stale in course.glob("*.ipynb"):
            if stale.name not in masters:
                stale.unlink()
                changed.append(stale)
    return changed
