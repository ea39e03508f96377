"""Scratch folders that go away when the run that made them ends, on success, error or Ctrl-C.

Grading, the demo and every crash matrix make folders in the temporary folder. ``shutil.rmtree(...,
ignore_errors=True)`` gives up without a word on a folder an agent made read-only, or on one that a
process still writing refills while it is being removed; each such run leaves a folder behind for good.
:func:`remove_scratch` makes what it cannot remove writable and tries again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator


def remove_scratch(path: str | os.PathLike | None, attempts: int = 5) -> None:
    """Remove a scratch folder and everything in it; never raises. Gone already is fine."""
    if path is None:
        return
    for attempt in range(attempts):
        try:
            shutil.rmtree(path, onerror=_writable_then_retry)
            return
        except FileNotFoundError:
            return
        except OSError:  # something still wrote into it, or a part would not go: wait a little, try again
            time.sleep(0.05 * (attempt + 1))
    shutil.rmtree(path, ignore_errors=True)


def _writable_then_retry(function, path, exc_info) -> None:
    """``rmtree``'s error handler: a part that is gone already is fine; one we may not remove because a
    folder was made read-only is made ours to remove (as ``tempfile.TemporaryDirectory`` does), and
    removed."""
    error = exc_info[1]
    if isinstance(error, FileNotFoundError):
        return
    if not isinstance(error, PermissionError):
        raise error
    for part in (os.path.dirname(path), path):
        _chmod_no_follow(part, stat.S_IRWXU)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, onerror=_writable_then_retry)
    else:
        os.unlink(path)


def _chmod_no_follow(path: str, mode: int) -> None:
    """chmod ``path`` itself, never what a symlink planted there points at (the grader runs as root in
    folders a submission wrote): the inode is pinned by an O_PATH descriptor, then changed through it."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        if not stat.S_ISLNK(os.fstat(fd).st_mode):
            os.chmod(f"/proc/self/fd/{fd}", mode)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def scratch_dir(prefix: str, dir: str | os.PathLike | None = None, keep: bool = False) -> Iterator[Path]:
    """``tempfile.mkdtemp(prefix=..., dir=...)`` for the length of a block, removed at its end unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=dir))
    try:
        yield path
    finally:
        if not keep:
            remove_scratch(path)


__all__ = ["remove_scratch", "scratch_dir"]
