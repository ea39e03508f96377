"""The masters' format: which cell is which (nbgrader's metadata), which lesson a notebook is, which files its
``%%writefile`` cells write, and where the masters are. Read by the grader, the builder, the release, the demo,
the soak and the lessons' kernels alike, so it imports nothing of theirs."""

from __future__ import annotations

import os
import re
from pathlib import Path

from crashlab.course.metadata import lesson_meta

QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR"]  # no start-up warnings on the grader's terminal


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def grade_id(cell) -> str | None:
    return nbgrader_meta(cell).get("grade_id")


EXERCISE = re.compile(r"ex(\d+)_")


def exercise_of(gid: str | None) -> int | None:
    """The exercise a grade id belongs to: ``ex2_dbos_agent_checks`` -> 2; None for an id of no exercise."""
    found = EXERCISE.match(gid or "")
    return int(found.group(1)) if found else None


def is_answer_cell(cell) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_test_cell(cell) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_locked(cell) -> bool:
    return bool(nbgrader_meta(cell).get("locked"))


def repo_root() -> Path:
    """The course repository: $CRASHLAB_ROOT, or the folder above the installed library's source."""
    if os.environ.get("CRASHLAB_ROOT"):
        return Path(os.environ["CRASHLAB_ROOT"]).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "solutions").is_dir() and (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def lesson_of(nb) -> str | None:
    return lesson_meta(nb).get("lesson")


def written_files(nb) -> dict[str, str]:
    """The files a notebook writes with ``%%writefile NAME`` cells, by name (later cells win)."""
    files: dict[str, str] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        first, _, body = cell.source.partition("\n")
        parts = first.split()
        if parts and parts[0] == "%%writefile":
            name = parts[-1]
            files[name] = files.get(name, "") + body + "\n" if "-a" in parts[1:-1] else body + "\n"
    return files
