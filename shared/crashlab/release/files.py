"""Which files of the repository a release or a bundle carries, and where their templates are."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"
ANSWERS_MODULE = re.compile(r"lesson(\d\d)\.py$")


def library_files(root: Path, answers_through: str | None = "99") -> list[Path]:
    """The library's source files (``shared/``), with the lesson answers of lessons after ``answers_through``
    left out (None: every lesson's); never compiled files, which would carry answers left out."""
    kept = []
    for path in sorted((root / "shared").rglob("*")):
        parts = path.relative_to(root).parts
        if not path.is_file() or "__pycache__" in parts or any(p.endswith(".egg-info") for p in parts):
            continue
        if path.suffix in (".pyc", ".pyo") or path.name.startswith("."):
            continue
        found = ANSWERS_MODULE.search(path.name)
        if "answers" in parts and found and (answers_through is None or found.group(1) > answers_through):
            continue
        kept.append(path)
    return kept
