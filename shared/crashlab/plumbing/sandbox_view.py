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

SHM_BYTES = 256 * 1024 ** 2  # a process tree's own /dev/shm (its memory counts against the grading's too)
SHM_FILES = 10_000           # files in it, and in the view's own root and /tmp
FORCE_OFF = "CRASHLAB_SANDBOX_WITHOUT"  # the grader's own variable: seals to do without, as a machine that lacks them


def forced_off(seal: str) -> bool:
    """Whether the grader was told to do without ``seal`` (``network``, ``ipc``, ``view``, ``limits``, ``files``),
    as a machine that does not allow it would: the tests use it to check each fallback and what the results say."""
    return seal in {part.strip() for part in os.environ.get(FORCE_OFF, "").split(",")}

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
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


def _own_namespace(libc, network: bool = False, ipc: bool = True) -> None:
    """A mount namespace of this process's own, whose mounts reach no other process, and an IPC namespace of its
    own: System V shared memory, semaphores and message queues made by this process and its children are seen by
    nobody else and go when the last of them ends (a segment made 0666 would otherwise outlive the grading and hold
    its memory until a reboot). ``network``: a network namespace of its own too, with nothing in it, not even a
    loopback that is up (for a process that must reach no server at all)."""
    flags = CLONE_NEWNS | (CLONE_NEWIPC if ipc else 0) | (CLONE_NEWNET if network else 0)
    _check(libc.unshare(flags), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making the mount namespace private")


def _own_shared_memory(libc, dev: str, ipc: bool = True) -> None:
    """An empty /dev/shm (POSIX shared memory, semaphores) and /dev/mqueue of this namespace's own, bounded in size
    and number of files, where ``dev`` (the view's /dev, or the machine's) had the machine's: whatever the process
    leaves there goes with it."""
    shm = os.path.join(dev, "shm")
    if os.path.isdir(shm) and not os.path.islink(shm):
        _check(libc.mount(b"tmpfs", os.fsencode(shm), b"tmpfs", MS_NOSUID | MS_NODEV,
                          f"size={SHM_BYTES},nr_inodes={SHM_FILES},mode=1777".encode()), "a /dev/shm of its own")
    mqueue = os.path.join(dev, "mqueue")
    if ipc and os.path.isdir(mqueue) and not os.path.islink(mqueue):
        _check(libc.mount(b"mqueue", os.fsencode(mqueue), b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
               "a /dev/mqueue of its own")


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


def enter_view(root: str, see: tuple[str, ...], hide: tuple[str, ...] = (), network: bool = False,
               ipc: bool = True) -> None:
    """In this process (between fork and exec, still root): a new mount namespace whose root holds only
    ``see`` and :func:`runtime_paths`, with ``hide`` covered up. ``root`` is an empty folder to build the view
    on (inside the new namespace a tmpfs is mounted there first, so nothing is written to it). ``network``, ``ipc``:
    see :func:`_own_namespace`."""
    libc = _libc()
    cwd = os.getcwd()
    libc.setfsuid(0)  # a judge works with the student's file rights (setfsuid); building the view needs root's
    libc.setfsgid(0)
    _own_namespace(libc, network, ipc)
    _check(libc.mount(b"tmpfs", os.fsencode(root), b"tmpfs", MS_NOSUID | MS_NODEV,
                      f"size=64m,nr_inodes={SHM_FILES},mode=0755".encode()), f"a tmpfs on {root}")
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
    _own_shared_memory(libc, os.path.join(root, "dev"), ipc)
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


def hide_only(paths, network: bool = False, ipc: bool = True) -> None:
    """The older, weaker view for a run that names nothing to see: the whole machine, ``paths`` covered up,
    and a /proc of the process's own user (and its own /dev/shm and IPC)."""
    libc = _libc()
    _own_namespace(libc, network, ipc)
    _own_shared_memory(libc, "/dev", ipc)
    cover(paths, libc)
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, b"hidepid=2")


def can_hide(flags: int = CLONE_NEWNS) -> bool:
    """Whether this machine lets us make mount namespaces (a container without CAP_SYS_ADMIN does not), or the
    namespaces ``flags`` names. Tried in a throwaway child, so nothing here changes."""
    if forced_off("view") or (flags & CLONE_NEWIPC and forced_off("ipc")):
        return False
    libc = _libc()  # loaded before the fork: the child only makes one call
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(flags) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
