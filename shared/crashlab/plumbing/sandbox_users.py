"""What root does to the sandbox users' processes and files: kill them all at once, give them folders, take files
back -- never following a path that one of them could have changed.

A folder a student's process has written may hold a symbolic link where a file or a folder was, to anything on the
machine (a file of root's, ``/dev/shm``, the installed library). Root walks such a folder only by directory
descriptors, and changes a file only through a descriptor that pins the very inode it looked at, opened without
following a link: a planted link is handed over as a link, never through.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import stat
import subprocess

from crashlab.errors import CrashlabError

MEMORY_LIMIT = 6 * 1024 ** 3      # bytes of address space per process
PROCESS_LIMIT = 768               # processes and threads of one sandbox user, all together
PR_SET_NO_NEW_PRIVS = 38
CAP_SYS_PTRACE = 19


class SandboxError(CrashlabError, RuntimeError):
    pass


def apply_limits() -> None:
    """Memory and process caps for untrusted code (also used when not isolated, minus the uid)."""
    for limit, value in ((resource.RLIMIT_AS, MEMORY_LIMIT), (resource.RLIMIT_NPROC, PROCESS_LIMIT),
                         (resource.RLIMIT_CORE, 0)):
        try:
            soft, hard = resource.getrlimit(limit)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (cap, cap))
        except (ValueError, OSError):
            pass


def no_new_privileges() -> None:
    """From here on no exec gains a privilege (a set-uid program runs as its caller): ``prctl(PR_SET_NO_NEW_PRIVS)``."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


# ``kill`` is the shell's builtin: the shell's own process is the only one of the user that the signal spares.
# A zombie (dead, not yet reaped) still counts as signalled, so the loop is bounded; the caller checks again.
_KILL_AS_USER = 'i=0; while kill -s KILL -- -1 2>/dev/null; do i=$((i+1)); [ "$i" -ge 20 ] && exit 0; done; exit 0'


def kill_every_process_of(uid: int, gid: int) -> None:
    """SIGKILL every process of ``uid`` at once, by becoming it: ``kill(-1, SIGKILL)`` sent as the user reaches every
    process of that uid in one pass of the kernel's process table, which a fork cannot slip through. Root only."""
    if uid == 0:
        raise SandboxError("refusing to kill every process of root")
    # setpriv (util-linux, on every Debian and Ubuntu) becomes the user after its exec. With ``user=`` the forked
    # child became the user first and exec'd after: for that moment a process of the user held a copy of the
    # caller's memory (the grader's, secrets and all), unreadable to the user (a change of uid makes it
    # non-dumpable) but there; and a check of every process of the user, run as the grader's, caught it so.
    setpriv = shutil.which("setpriv")
    quiet = subprocess.DEVNULL
    try:
        if setpriv is not None:
            subprocess.run([setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "/bin/sh", "-c",
                            _KILL_AS_USER], env={}, stdin=quiet, stdout=quiet, stderr=quiet, timeout=10)
        else:
            subprocess.run(["/bin/sh", "-c", _KILL_AS_USER], user=uid, group=gid, extra_groups=[], env={},
                           stdin=quiet, stdout=quiet, stderr=quiet, timeout=10)
    except (OSError, subprocess.SubprocessError):
        pass  # the caller lists what is left and tries again


def _pinned(name: str, dirfd: int) -> int | None:
    """An O_PATH descriptor of ``name`` in ``dirfd`` itself (a link stays a link), or None if it is gone."""
    try:
        return os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=dirfd)
    except OSError:
        return None


def own_tree(path, uid: int, gid: int) -> None:
    """Give ``path`` and everything in it to ``uid``/``gid``, the group getting the owner's rights. Walked by
    directory descriptors; each entry changed through a descriptor of the inode it is, so a link is given away as
    a link (its target untouched) and a folder swapped for a link is never entered."""
    for _, dirs, files, dirfd in os.fwalk(path, follow_symlinks=False):
        for name in [".", *dirs, *files]:
            fd = _pinned(name, dirfd)
            if fd is None:
                continue
            try:
                info = os.fstat(fd)
                if stat.S_ISLNK(info.st_mode):
                    os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)  # lchown: the link itself
                else:
                    os.chown(f"/proc/self/fd/{fd}", uid, gid)
                    mode = info.st_mode & 0o7777
                    os.chmod(f"/proc/self/fd/{fd}", mode | ((mode & 0o700) >> 3))
            except OSError:
                pass
            finally:
                os.close(fd)


def share_with_group(path) -> None:
    """What this process owns under ``path``, made usable by its group (the run's crash users); links untouched."""
    try:
        for _, dirs, files, dirfd in os.fwalk(path, follow_symlinks=False):
            _share_entries(dirfd, dirs, files)
    except OSError:
        pass


def _share_entries(dirfd: int, dirs: list[str], files: list[str]) -> None:
    for name, mode in [(".", 0o2770), *((d, 0o2770) for d in dirs), *((f, 0o660) for f in files)]:
        try:  # opened, not pinned by O_PATH: this process may not read its own /proc/self/fd (setfsuid)
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dirfd)
        except OSError:
            continue  # a link, a socket, or gone
        try:
            os.fchmod(fd, mode)
        except OSError:
            pass
        finally:
            os.close(fd)


def hand_back(folder, uid: int, to_uid: int, to_gid: int) -> None:
    """Give ``to_uid`` every file of ``uid`` under ``folder``. Walked by directory descriptors, never following a
    symlink, so a folder swapped for a link mid-walk cannot point root's chown elsewhere."""
    previous = set_fs_ids(0, 0)  # the judge works with the sandbox user's file rights: root's, for this
    try:
        for _, _, _, dirfd in os.fwalk(folder, follow_symlinks=False):
            for name in [".", *os.listdir(dirfd)]:
                try:
                    if os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_uid == uid:
                        os.chown(name, to_uid, to_gid, dir_fd=dirfd, follow_symlinks=False)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        set_fs_ids(*previous)


def set_fs_ids(uid: int, gid: int) -> tuple[int, int]:
    """Do this thread's file access as ``uid``/``gid`` (setfsuid/setfsgid) while keeping root's other powers; returns
    the previous pair. Raises :class:`SandboxError` if the kernel did not take it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if uid != 0 and os.getgroups():
        # A supplementary group is checked with the file user: root's group 0 (what sudo, and a container, give root)
        # would put the sandbox user in the group class of every folder of group root -- /root, 0701, where a
        # Python may live, lets "other" pass and its group not. Root needs none of them (its powers are its uid's).
        os.setgroups([])
    previous_gid = libc.setfsgid(gid)
    previous_uid = libc.setfsuid(uid)
    if libc.setfsuid(-1) != uid or libc.setfsgid(-1) != gid:  # each returns the value before: read it back
        raise SandboxError("setfsuid failed")
    return previous_uid, previous_gid


def fs_ids() -> tuple[int, int]:
    """This thread's file user and group (what :func:`set_fs_ids` set, or the effective ones)."""
    with open("/proc/thread-self/status") as status:
        fields = {line.split(":", 1)[0]: line.split()[1:] for line in status if line.startswith(("Uid:", "Gid:"))}
    return int(fields["Uid"][3]), int(fields["Gid"][3])


def has_capability(bit: int) -> bool:
    """Whether this process holds the capability numbered ``bit`` (its effective set, /proc/self/status)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    return False
