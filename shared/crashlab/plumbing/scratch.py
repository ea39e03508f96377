"""Scratch folders that go away when the run that made them ends, on success, error or Ctrl-C.

Grading, the demo and every crash matrix make folders in the temporary folder. ``shutil.rmtree(...,
ignore_errors=True)`` gives up without a word on a folder an agent made read-only, or on one that a
process still writing refills while it is being removed; each such run leaves a folder behind for good.
:func:`remove_scratch` makes what it cannot remove writable and tries again.

A command killed by SIGKILL removes nothing. So each folder :func:`make_scratch` makes in the temporary folder
says in its name whose it is -- ``crashlab-grade-<pid>.<start>-xxxxxxxx``, the pid of the process that made it
and that process's start time (from ``/proc/<pid>/stat``, so that a pid the system has given to another
process since is not taken for the owner) -- and every command starts with :func:`sweep_scratch`, which
removes the folders whose owner is gone: only names of that form, only folders of our uid (as root, of the
course's sandbox users too: an isolated grading hands its folder to one), never one whose owner still runs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator

from crashlab.plumbing.process_tree import start_time


def remove_scratch(path: str | os.PathLike | None, attempts: int = 5) -> None:
    """Remove a scratch folder and everything in it; never raises. Gone already is fine. A file system mounted
    inside it (a grading's box, left by a grader that was killed) is detached first, whatever is in it."""
    if path is None:
        return
    _unmount_inside(os.fspath(path))
    for attempt in range(attempts):
        try:
            shutil.rmtree(path, onerror=_writable_then_retry)
            return
        except FileNotFoundError:
            return
        except OSError:  # something still wrote into it, or a part would not go: wait a little, try again
            time.sleep(0.05 * (attempt + 1))
    shutil.rmtree(path, ignore_errors=True)


def _unmount_inside(path: str) -> None:
    """Detach every mount at or below ``path`` (root only; deepest first). Never raises."""
    if os.geteuid() != 0 or not os.path.isdir(path):
        return
    prefix = os.path.realpath(path).rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo") as mounts:
            points = [line.split()[4].replace("\\040", " ") for line in mounts]
    except OSError:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for point in sorted((p for p in points if (p + "/").startswith(prefix)), key=len, reverse=True):
        libc.umount2(os.fsencode(point), 2)  # MNT_DETACH


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


# crashlab-<words>-<pid>.<start time>-<mkdtemp's eight characters>: a scratch folder and its owner
_OWNED = re.compile(r"crashlab-[a-z]+(?:-[a-z]+)*-(?P<pid>[0-9]+)\.(?P<start>[0-9]+)-[a-z0-9_]{8}")


def make_scratch(prefix: str, dir: str | os.PathLike | None = None) -> Path:
    """``tempfile.mkdtemp(prefix=..., dir=...)``, named after this process (``prefix`` is ``crashlab-<words>-``)
    so that :func:`sweep_scratch` can remove it once this process is gone, however it ended."""
    if not re.fullmatch(r"crashlab-[a-z]+(?:-[a-z]+)*-", prefix):
        raise ValueError(f"a scratch folder's prefix is crashlab-<words>-, got {prefix!r}")
    pid = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{pid}.{start_time(pid) or 0}-", dir=dir))


def sweep_scratch(dir: str | os.PathLike | None = None) -> list[Path]:
    """Remove the scratch folders in ``dir`` (the temporary folder) whose owner is gone: a process killed by
    SIGKILL left them. Only a folder named by :func:`make_scratch`, of our uid (:func:`_ours`), not a link, and
    whose owner's pid is free or now another process's (another start time). Never raises; says what it removed."""
    if start_time(os.getpid()) is None:  # no /proc: no way to tell a live owner from a gone one
        return []
    folder = Path(dir if dir is not None else tempfile.gettempdir())
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        owned = _OWNED.fullmatch(name)
        if owned is None:
            continue
        path = folder / name
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or not _ours(info.st_uid):
            continue
        if start_time(int(owned["pid"])) == int(owned["start"]):  # its owner still runs
            continue
        remove_scratch(path)
        removed.append(path)
    return removed


def _ours(uid: int) -> bool:
    """Our uid; or, as root, one of the course's sandbox users (``crashlab-sb<N>``, ``crashlab-sb<N>c<K>``, and the
    reference users ``crashlab-sb<N>r``, ``crashlab-sb<N>rc<K>``), to whom an isolated grading hands its folders."""
    if uid == os.getuid():
        return True
    if os.getuid() != 0:
        return False
    try:
        return re.fullmatch(r"crashlab-sb[0-9]+r?(?:c[0-9]+)?", pwd.getpwuid(uid).pw_name) is not None
    except KeyError:
        return False


@contextlib.contextmanager
def scratch_dir(prefix: str, dir: str | os.PathLike | None = None, keep: bool = False) -> Iterator[Path]:
    """:func:`make_scratch` for the length of a block, removed at its end unless ``keep``."""
    path = make_scratch(prefix, dir)
    try:
        yield path
    finally:
        if not keep:
            remove_scratch(path)


__all__ = ["make_scratch", "remove_scratch", "scratch_dir", "sweep_scratch"]
