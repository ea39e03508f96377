"""A submission is the student's own bytes: found by lesson, read without following a link, then copied.

The grader runs as root and can read anything. A "notebook" that is a symbolic link to a master (``->
/autograder/source/solutions/01_...``), to a classmate's file, or into a folder of root's would be graded as
if the student had written it. So a submission is a regular file lying inside the student's own folder, reached
without passing through a link; it is read once, here, and everything after works on that copy.

Students rename files (a browser saves a second download as ``01_naive_event_log (1).ipynb``, Jupyter makes
``-Copy1``), so a file is matched to its lesson by the lesson id the course puts in every notebook, or by a
name that begins with the master's.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import nbformat

from crashlab.course.notebooks import lesson_of
from crashlab.grading.report import GradingError

MAX_BYTES = 64 << 20  # a course notebook with its outputs is well under this


def read_own(path: str | os.PathLike, folder: str | os.PathLike | None = None) -> bytes:
    """The bytes of ``path``, a regular file inside ``folder`` (its own folder by default) that is reached
    without following a symbolic link at any step below ``folder``. Anything else is a :class:`GradingError`
    that says why."""
    path = Path(os.path.abspath(path))
    folder = Path(os.path.abspath(folder if folder is not None else path.parent))
    try:
        inside = path.relative_to(folder)
    except ValueError:
        raise GradingError(f"{path.name} is not inside the submission's folder") from None
    step = folder
    for part in inside.parts:
        step = step / part
        try:
            info = os.lstat(step)
        except FileNotFoundError:
            raise GradingError(f"{inside}: no such file") from None
        if stat.S_ISLNK(info.st_mode):
            raise GradingError(f"{inside} is a symbolic link{'' if step == path else ' on its way'}: submit the "
                               "notebook file itself (a link to another file is not your work)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise GradingError(f"{inside} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise GradingError(f"{inside} is not a regular file")
        if info.st_size > MAX_BYTES:
            raise GradingError(f"{inside} is {info.st_size >> 20} MB: larger than any course notebook "
                               f"({MAX_BYTES >> 20} MB at most); clear its outputs and submit it again")
        return f.read(MAX_BYTES + 1)


def parse(data: bytes, name: str) -> nbformat.NotebookNode:
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as exc:  # nbformat raises several kinds for a non-notebook
        raise GradingError(f"{name} is not a Jupyter notebook ({type(exc).__name__}: {str(exc)[:120]})") from None
    # nbformat only warns about a cell without text for its source; every later step reads it as text
    textless = next((n for n, cell in enumerate(nb.cells, 1) if not isinstance(cell.get("source"), str)), None)
    if textless is not None:
        raise GradingError(f"{name} is not a Jupyter notebook (its cell {textless} has no text for its source)")
    return nb


def read_notebook(path: str | os.PathLike, folder: str | os.PathLike | None = None) -> nbformat.NotebookNode:
    """:func:`read_own`, parsed as a notebook."""
    return parse(read_own(path, folder), Path(path).name)


def unreadable(path: Path, folder: Path) -> str | None:
    """Why the file cannot be graded at all (costs no grading), or None."""
    try:
        read_notebook(path, folder)
    except GradingError as exc:
        return str(exc).replace(str(path), str(path.relative_to(folder)))
    return None


def notebooks_in(folder: Path) -> list[Path]:
    """Every ``*.ipynb`` below ``folder``, links included (so that they can be refused with a reason), never
    walking into a linked folder, a hidden one or Jupyter's checkpoints; shallowest first."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != ".ipynb_checkpoints")
        found += [Path(root) / name for name in files if name.endswith(".ipynb") and not name.startswith(".")]
    return sorted(found, key=lambda p: (len(p.relative_to(folder).parts), str(p)))


def lesson_master(path: Path, folder: Path, masters: list[Path], lessons: dict[str, Path]) -> Path | None:
    """The master ``path`` is a submission for: by its exact name, then by the lesson id in the notebook, then
    by a name that begins with a master's (``01_naive_event_log (1).ipynb``); None if it is no course
    notebook. A link or an unreadable file is matched by its name alone (and refused when graded)."""
    exact = next((m for m in masters if m.name == path.name), None)
    if exact is not None:
        return exact
    try:
        lesson = lesson_of(read_notebook(path, folder))
    except GradingError:
        lesson = None
    if lesson in lessons:
        return lessons[lesson]
    return next((m for m in masters if path.stem.startswith(m.stem)), None)


def masters_by_lesson(masters: list[Path]) -> dict[str, Path]:
    lessons = {}
    for master in masters:
        lesson = lesson_of(nbformat.read(master, as_version=4))
        if lesson:
            lessons[lesson] = master
    return lessons


__all__ = ["read_own", "read_notebook", "parse", "unreadable", "notebooks_in", "lesson_master", "masters_by_lesson", "MAX_BYTES"]
