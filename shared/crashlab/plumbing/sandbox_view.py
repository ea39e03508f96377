"""What a sandboxed process can see of the machine: an allow-list, not a list of things to hide.

Hiding the masters one folder at a time (this checkout's ``solutions/`` and ``.git``) leaves every other copy
of the course readable: a second checkout, ``/autograder/source``, a classmate's submission in the folder a
batch grades, the grader's own working directory. So a process that runs a student's code gets a file system
of its own, in a mount namespace of its own: a small root that holds only what it needs --

- the system (``/usr``, ``/etc``, ``/dev``, ``/sys`` and the ``/bin``-style links into ``/usr``),
- the Python that runs it and its packages, and the course library,
- the folders the grading run names (the submission's own folder, the scratch folder of its crash rows),
- an empty ``/tmp`` of the process's own (the grader points ``TMPDIR`` elsewhere) and a ``/proc`` that shows
  only the process's own user,

each bound at its own path, so every path the grader hands over means the same inside. Anything else on the
machine is simply not there. Within what is visible, some files are covered up as before (the answers of the
lesson being graded, over which an empty file or folder is mounted).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.plumbing import LIBRARY

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/sys")


class ViewError(CrashlabError, RuntimeError):
    pass


def runtime_paths() -> tuple[str, ...]:
    """The system, this Python (the venv and the interpreter it links to) and the course library."""
    library = LIBRARY.parent
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return (*SYSTEM, *sorted(python), str(library))


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        raise ViewError(f"{what} failed: {os.strerror(ctypes.get_errno())}")


def _own_namespace(libc) -> None:
    """A mount namespace of this process's own, whose mounts reach no other process."""
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making the mount namespace private")


def _covered(path: str, done: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in done)


def _make_dirs(root: str, path: str) -> str:
    """``root + path`` as real folders made one by one in the new root, never through a link or a mount."""
    current = root
    for part in Path(path).parts[1:]:
        current = os.path.join(current, part)
        if os.path.islink(current) or os.path.ismount(current):
            raise ViewError(f"{path} would pass through {current}")
        if not os.path.isdir(current):
            os.mkdir(current, 0o755)
    return current


def enter_view(root: str, see: tuple[str, ...], hide: tuple[str, ...] = ()) -> None:
    """In this process (between fork and exec, still root): a new mount namespace whose root holds only
    ``see`` and :func:`runtime_paths`, with ``hide`` covered up. ``root`` is an empty folder to build the view
    on (inside the new namespace a tmpfs is mounted there first, so nothing is written to it)."""
    libc = _libc()
    cwd = os.getcwd()
    libc.setfsuid(0)  # a judge works with the student's file rights (setfsuid); building the view needs root's
    libc.setfsgid(0)
    _own_namespace(libc)
    _check(libc.mount(b"tmpfs", os.fsencode(root), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m,mode=0755"),
           f"a tmpfs on {root}")
    done: list[str] = []
    for path in sorted({os.path.abspath(p) for p in (*runtime_paths(), *see)}):
        if not os.path.lexists(path) or _covered(path, done):
            continue
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /bin -> usr/bin on a merged-/usr system
            os.symlink(os.readlink(path), os.path.join(root, path.lstrip("/")))
            continue
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            continue
        target = _make_dirs(root, path)
        _check(libc.mount(os.fsencode(real), os.fsencode(target), None, MS_BIND | MS_REC, None), f"binding {path}")
        done.append(path)
    for name, mode in (("proc", 0o555), ("tmp", 0o1777)):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        os.chmod(os.path.join(root, name), mode)
    os.chroot(root)
    os.chdir(cwd if os.path.isdir(cwd) else "/")
    cover(hide, libc)
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, b"hidepid=2"), "/proc")


def cover(paths, libc=None) -> None:
    """An empty read-only tmpfs over each folder, /dev/null over each file (in the current namespace)."""
    libc = libc or _libc()
    for path in paths:
        if os.path.isdir(path):
            hidden = libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_RDONLY, b"size=4k,mode=0555")
        elif os.path.exists(path):
            hidden = libc.mount(b"/dev/null", os.fsencode(path), None, MS_BIND, None)
        else:
            continue
        _check(hidden, f"hiding {path}")


def hide_only(paths) -> None:
    """The older, weaker view for a run that names nothing to see: the whole machine, ``paths`` covered up,
    and a /proc of the process's own user."""
    libc = _libc()
    _own_namespace(libc)
    cover(paths, libc)
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, b"hidepid=2")


def can_hide() -> bool:
    """Whether this machine lets us make mount namespaces (a container without CAP_SYS_ADMIN does not).
    Tried in a throwaway child, so nothing here changes."""
    libc = _libc()  # loaded before the fork: the child only makes one call
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(CLONE_NEWNS) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
