"""Turn a master notebook into the student notebook, with nbgrader's preprocessors chained.

LockCells -> ClearSolutions -> ClearHiddenTests -> ClearOutput, then :class:`DropWidgetState` (the masters'
saved progress bars); :class:`MarkCellsThatMayRaise`, which tags every answer cell, test cell and cell marked
``uses-answers`` with ``raises-exception`` so that Run All goes on past them in the unanswered student
notebook: those cells raise until the learner answers;
:class:`SkipDemonstrationsInNbval`; and :class:`MoveNbvalMarkersToTags`, so no nbval comment sits in
the code learners read.

The learner works in ``course/``, so :func:`build_course` writes only what it wrote before: each student
notebook carries the fingerprint of its content (``metadata.crashlab_build``), and a file whose content no
longer matches it is the learner's and left alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions, LockCells

from crashlab.course.notebooks import is_answer_cell, is_test_cell, repo_root
from crashlab.plumbing.outputs import Kind, write_output

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


# The notebook metadata the build sets: the fingerprint of what it wrote. A learner's edit (an answer, a note,
# outputs of a run) changes the content and no longer matches it, so the next build knows to leave the file alone.
STAMP_KEY = "crashlab_build"


def _fingerprint(nb: dict) -> str:
    bare = copy.deepcopy(nb)
    bare.get("metadata", {}).pop(STAMP_KEY, None)
    return hashlib.sha256(_serialise(bare).encode()).hexdigest()


def stamped_text(student: nbformat.NotebookNode) -> str:
    """The file the build writes for ``student``: the notebook carrying the fingerprint of its own content."""
    nb = copy.deepcopy(student)
    nb.metadata[STAMP_KEY] = {"sha256": _fingerprint(student)}
    return _serialise(nb)


def is_untouched(path: Path, student: nbformat.NotebookNode | None = None) -> bool:
    """Whether ``path`` holds what a build wrote: its content still matches the fingerprint the build stamped
    on it, or (a notebook from before the stamp) it equals ``student`` but for the stamp. Anything else -- an
    answered notebook, one Jupyter re-saved after a run, a symlink, a file that is not JSON -- is the learner's."""
    if path.is_symlink():
        return False
    try:  # nbformat joins the lists of lines Jupyter saves a cell's source as, as the build's own text has them
        nb = nbformat.reads(path.read_text(), as_version=4)
    except Exception:  # not readable, not JSON, not a notebook: nbformat raises several kinds
        return False
    if not isinstance(nb.get("metadata"), dict):
        return False
    stamp = nb["metadata"].get(STAMP_KEY)
    recorded = stamp.get("sha256") if isinstance(stamp, dict) else None
    content = _fingerprint(nb)
    return content == recorded or (student is not None and content == _fingerprint(student))


STUDENT_NOTEBOOK = Kind("a student notebook the build wrote", is_untouched)


@dataclass
class CourseBuild:
    """What a build did: the notebooks it wrote, and those it left alone with the reason (one line each)."""

    wrote: list[Path] = field(default_factory=list)
    left_alone: list[tuple[Path, str]] = field(default_factory=list)


def _students(solutions: Path, course: Path):
    for master_path in sorted(solutions.glob("*.ipynb")):
        student = student_version(nbformat.read(master_path, as_version=4))
        nbformat.validate(student)
        yield course / master_path.name, student


def out_of_date(solutions: Path | None = None, course: Path | None = None) -> list[Path]:
    """The student notebooks in ``course/`` that differ from what a build would write now (nothing is written)."""
    root = repo_root()
    return [target for target, student in _students(solutions or root / "solutions", course or root / "course")
            if not target.is_file() or target.read_text() != stamped_text(student)]


def build_course(solutions: Path | None = None, course: Path | None = None, *, force: bool = False) -> CourseBuild:
    """Regenerate ``course/`` from ``solutions/``, replacing nothing the build did not write.

    The learner works in ``course/``: a student notebook they changed is left alone (``force`` replaces it
    anyway, for an author who means to), and a notebook with no master (a Jupyter "-Copy1", their notes) is
    never deleted -- one with the build's stamp is named, since it may be an old lesson's left behind."""
    root = repo_root()
    solutions = solutions or root / "solutions"
    course = course or root / "course"
    done = CourseBuild()
    for target, student in _students(solutions, course):
        text = stamped_text(student)
        if target.is_file() and not target.is_symlink() and target.read_text() == text:
            continue
        if target.is_dir() and not target.is_symlink():
            done.left_alone.append((target, "a folder, not a notebook: move it to get the student notebook"))
            continue
        if (target.exists() or target.is_symlink()) and not force and not is_untouched(target, student):
            done.left_alone.append((target, "changed since the build wrote it (kept as it is); "
                                            "`crashlab build --force` replaces it with the new student version"))
            continue
        course.mkdir(parents=True, exist_ok=True)
        # Atomically (a symlink replaced, never written through): a build cut short leaves no half notebook,
        # which the next build would take for the learner's and leave alone.
        write_output(target, text, STUDENT_NOTEBOOK, force=True)
        done.wrote.append(target)
    masters = {p.name for p in solutions.glob("*.ipynb")}
    for other in sorted(course.glob("*.ipynb")):
        if other.name not in masters and is_untouched(other):
            done.left_alone.append((other, f"a build wrote it but solutions/ has no {other.name} (an old "
                                           "lesson's, or a copy of one?); delete it if you do not need it"))
    return done


def without_hidden_checks(master_cell):
    """A copy of a master cell with its hidden checks removed, as nbgrader removes them for the student notebook;
    everything else (nbval's comments included) as it is."""
    import copy

    cell, _ = ClearHiddenTests().preprocess_cell(copy.deepcopy(master_cell), {}, 0)
    return cell


def as_given_to_students(master_cell) -> str:
    """The source of a master cell as the student notebook shows it: hidden checks removed, nbval comments
    moved to tags (see :mod:`crashlab.grading.build`)."""
    cell, _ = MoveNbvalMarkersToTags().preprocess_cell(without_hidden_checks(master_cell), {}, 0)
    return cell.source


