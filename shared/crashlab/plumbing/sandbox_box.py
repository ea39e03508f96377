"""One grading, one sealed box: the kernel's own isolation around everything a grading runs.

- **A network of its own.** The grading's thread enters a new network namespace with only its loopback, so
  every process it starts -- the judge, the worlds, the Temporal and Restate servers, the agents, the student's
  kernel -- listens and connects there and nowhere else: nothing of one grading reaches another grading's worlds
  or servers, or the machine's own (a PostgreSQL, another user's dev server). Processes forked from a warm launcher
  that was started outside are moved into the namespace of the thread that asks for them (see
  :mod:`crashlab.harness.launcher_process`). The grader reads what it needs from inside (the worlds' audits, over
  the loopback, in its own threads) and writes the results outside: files, not sockets.
- **Limits on the whole, not per process.** The student's processes (the kernel and all it starts, the subject,
  every agent) share one memory cgroup and one pids cgroup, created under the grader's own cgroup (so nothing moves
  outside whatever limits the grader itself runs under): a 4 GiB total and 512 processes and threads, however they
  are spread over processes and users. Their scratch folders (the student's folder, the crash rows' folders) are
  file systems of their own (tmpfs) with a size and a number of files: 835,000 files in 50 s end at the limit,
  and removing them at the end is one unmount, whatever is in them.
- IPC and ``/dev/shm`` of their own per process tree: see :mod:`crashlab.plumbing.sandbox_view`.

Each seal is tried, and where the machine does not allow it (a container without CAP_SYS_ADMIN, a read-only
cgroup file system), the grading goes on without it and says so in its notes; ``CRASHLAB_SANDBOX_WITHOUT``
(``network,limits,files``) makes the grader do without as such a machine would, for the tests of each fallback.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import time
from pathlib import Path

from crashlab.plumbing.sandbox_view import CLONE_NEWNET, MS_NODEV, MS_NOSUID, forced_off

MEMORY_TOTAL = 4 * 1024 ** 3   # bytes of memory, the student's processes together (their tmpfs files included)
TASKS_TOTAL = 512              # processes and threads, the student's together (under the 768 each user may have)
FILES_BYTES = 1024 ** 3        # the student's folder, and the crash rows' folders: bytes each
FILES_COUNT = 100_000          # and files (inodes) each
LOG_BYTES = 16 * 1024 ** 2     # the notebook runner's stderr, which the kernel inherits: bytes
MNT_DETACH = 2
CGROUP_PREFIX = "crashlab-grading-"


def _libc():
    return ctypes.CDLL(None, use_errno=True)


# --- the network ------------------------------------------------------------------------------------------------
def netns_id(path: str = "/proc/thread-self/ns/net") -> int:
    """The network namespace of a thread (this one by default), as the inode number that names it."""
    return os.stat(path).st_ino


def thread_netns_path() -> str:
    """Where another process (a warm launcher) finds this thread's network namespace."""
    import threading

    return f"/proc/{os.getpid()}/task/{threading.get_native_id()}/ns/net"


def loopback_up() -> None:
    """Bring ``lo`` up in this thread's network namespace (a new one has it down)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


class OwnNetwork:
    """This thread in a network namespace of its own, with only its loopback, until :meth:`leave`. Threads and
    processes it starts meanwhile are born in it. ``ok`` is False where the machine refused."""

    def __init__(self):
        self.ok, self.why, self._back = False, "", None
        if forced_off("network"):
            self.why = "told to do without (CRASHLAB_SANDBOX_WITHOUT)"
            return
        libc = _libc()
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        if libc.unshare(CLONE_NEWNET) != 0:
            self.why = os.strerror(ctypes.get_errno())
            os.close(back)
            return
        self._back = back
        try:
            loopback_up()
        except OSError as exc:
            self.leave()
            self.why = f"no loopback in it ({exc.strerror or exc})"
            return
        self.ok = True

    def leave(self) -> None:
        """Back to the namespace this thread was in; the box's goes when its last process ends."""
        if self._back is not None:
            _libc().setns(self._back, CLONE_NEWNET)
            os.close(self._back)
            self._back = None


# --- file systems of a size ---------------------------------------------------------------------------------------
def mount_tmpfs(path: Path, size: int, files: int, mode: int) -> str | None:
    """A tmpfs of ``size`` bytes and ``files`` inodes on the (empty, ours) folder ``path``; None, or why not."""
    if forced_off("files"):
        return "told to do without (CRASHLAB_SANDBOX_WITHOUT)"
    libc = _libc()
    options = f"size={size},nr_inodes={files},mode={mode:o}".encode()
    if libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def unmount(path: Path) -> None:
    """Detach the file system mounted on ``path`` (its files go with it, however many), if there is one."""
    _libc().umount2(os.fsencode(path), MNT_DETACH)


def full(path: Path) -> str | None:
    """What of ``path``'s file system is used up ("bytes", "files"), or None."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    if info.f_files and info.f_ffree <= max(16, info.f_files // 1000):
        return "files"
    if info.f_blocks and info.f_bavail <= max(16, info.f_blocks // 1000):
        return "bytes"
    return None


# --- cgroups ------------------------------------------------------------------------------------------------------
def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, type, options) of each cgroup file system."""
    found = []
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 3 and fields[2] in ("cgroup", "cgroup2"):
                found.append((fields[1].replace("\\040", " "), fields[2], set(fields[3].split(","))))
    return found


def _own_cgroup(hierarchy: str) -> str:
    """This process's cgroup in a v1 hierarchy (``memory``) or, with "", the v2 one."""
    with open("/proc/self/cgroup") as groups:
        for line in groups:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (hierarchy and hierarchy in controllers.split(",")) or (not hierarchy and controllers == ""):
                return path
    return "/"


class Limits:
    """A memory cgroup and a pids cgroup for one grading's untrusted processes: cgroup v1 where the machine mounts
    those controllers so (this machine, CI), else v2. ``paths``: the folders a process joins (:meth:`join`)."""

    def __init__(self, name: str, memory: int | None = None, tasks: int | None = None):
        self.paths: tuple[str, ...] = ()
        self.version = ""
        self.why = ""
        self.memory, self.tasks = memory or MEMORY_TOTAL, tasks or TASKS_TOTAL
        memory, tasks = self.memory, self.tasks
        if forced_off("limits"):
            self.why = "told to do without (CRASHLAB_SANDBOX_WITHOUT)"
            return
        try:
            mounts = _mounts()
            v1 = {c: point for point, kind, options in mounts if kind == "cgroup" for c in ("memory", "pids")
                  if c in options}
            if set(v1) == {"memory", "pids"}:
                self.version = "v1"
                self.paths = (self._make(os.path.join(v1["memory"], _own_cgroup("memory").lstrip("/"), name),
                                         {"memory.limit_in_bytes": memory}),
                              self._make(os.path.join(v1["pids"], _own_cgroup("pids").lstrip("/"), name),
                                         {"pids.max": tasks}))
            else:
                root = next(point for point, kind, _ in mounts if kind == "cgroup2")
                self.version = "v2"
                parent = os.path.join(root, "crashlab-gradings")
                os.makedirs(parent, exist_ok=True)
                for folder in (root, parent):
                    with open(os.path.join(folder, "cgroup.subtree_control"), "w") as control:
                        control.write("+memory +pids")
                self.paths = (self._make(os.path.join(parent, name), {"memory.max": memory, "pids.max": tasks}),)
        except (OSError, StopIteration) as exc:
            self.remove()
            self.paths, self.version = (), ""
            self.why = getattr(exc, "strerror", None) or "no cgroup file system with memory and pids"

    def _make(self, path: str, limits: dict[str, int]) -> str:
        self.paths = (*self.paths, path)  # removed on failure, even half made
        if os.path.isdir(path):  # left by a grader killed in this slot: its processes are dead (the slot killed them)
            remove_cgroup_folder(path)
        os.mkdir(path, 0o755)
        for name, value in limits.items():
            with open(os.path.join(path, name), "w") as limit:
                limit.write(str(value))
        return path

    def hit(self) -> list[str]:
        """Which limit the processes met, in words, for the grading's notes."""
        said = []
        for path in self.paths:
            events = _read_keyed(os.path.join(path, "pids.events"))
            if events.get("max"):
                said.append(f"the submission's processes reached the grading's limit of {self.tasks} processes and "
                            f"threads together: {events['max']} of their forks failed")
            oom = _read_keyed(os.path.join(path, "memory.oom_control" if self.version == "v1" else "memory.events"))
            if oom.get("oom_kill") or (self.version == "v1" and _read_int(os.path.join(path, "memory.failcnt"))):
                said.append(f"the submission's processes reached the grading's memory limit "
                            f"({self.memory / 1024 ** 3:g} GiB together)" +
                            (f": {oom['oom_kill']} of them killed by the kernel" if oom.get("oom_kill") else ""))
        return said

    def peak(self) -> dict[str, int]:
        """The most the processes took together: ``tasks`` (processes and threads), ``memory`` (bytes)."""
        found = {}
        for path in self.paths:
            for key, name in (("tasks", "pids.peak"), ("memory", "memory.max_usage_in_bytes"), ("memory", "memory.peak")):
                value = _read_int(os.path.join(path, name))
                if value:
                    found[key] = value
        return found

    def remove(self) -> None:
        for path in self.paths:
            remove_cgroup_folder(path)


def join_cgroups(paths) -> None:
    """Move this process into each cgroup in ``paths`` (between fork and exec, still root)."""
    for path in paths:
        with open(os.path.join(path, "cgroup.procs"), "w") as procs:
            procs.write("0")


def _read_keyed(path: str) -> dict[str, int]:
    try:
        with open(path) as f:
            return {k: int(v) for k, v in (line.split() for line in f if len(line.split()) == 2)}
    except (OSError, ValueError):
        return {}


def _read_int(path: str) -> int:
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def remove_cgroup_folder(path: str, timeout: float = 2.0, before=None) -> None:
    """rmdir a cgroup once its processes are gone (killed already: a moment for the kernel to reap them), trying
    until ``timeout``; ``before()`` is called before each try (a kill of what is left). Never raises."""
    deadline = time.monotonic() + timeout
    while True:
        if before is not None:
            before()
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
