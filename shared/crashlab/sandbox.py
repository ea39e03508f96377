"""Where untrusted code runs when the grader is root: a dedicated unprivileged user per grading run.

Principle: *untrusted code produces data; a trusted process judges it.* When grading runs as root (a
CI runner, a Gradescope container, ``.ci/run``), every process that runs a student's code -- the
kernel, the agents, the workers, the check subject -- runs as ``crashlab-sbN``, a system user made
on demand, with no supplementary groups, a memory cap and a process cap. That user cannot write the
installed library, the world's ledgers or the results, cannot signal or trace the grader, and every
process it ever started dies at the deadline (all processes of the uid are killed: no new session or
double fork escapes that). Each concurrent grading run holds its own slot, so one run's deadline
never kills another's processes.

When the grader is not root (a learner's laptop), there is nothing to drop to: grading still runs
student code in separate processes, and the results say ``isolated: false``.

The active sandbox is handed to child processes of the grader in ``CRASHLAB_SANDBOX`` (JSON), so the
harness knows to demote the agents it starts.
"""

from __future__ import annotations

import contextvars
import ctypes
import fcntl
import json
import os
import pwd
import resource
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ENV_SANDBOX = "CRASHLAB_SANDBOX"
SLOTS = 8
CRASH_USERS = 4                   # users of a slot's own for crashed runs (one per crash-matrix row at a time)
SLOT_DIR = Path("/run/crashlab-sandbox")
MEMORY_LIMIT = 6 * 1024 ** 3      # bytes of address space per process
PROCESS_LIMIT = 768               # processes and threads of the sandbox user, all together


class SandboxError(RuntimeError):
    pass


@dataclass(frozen=True)
class Sandbox:
    uid: int
    gid: int
    user: str
    home: str
    hide: tuple = ()  # what the student must not read: the masters' folder, the answers being graded
    crash_users: tuple = ()  # (uid, name) pairs: see :func:`crash_user`

    # --- what a child process needs --------------------------------------------------------------
    def demote(self) -> None:
        """For ``preexec_fn`` (or a forked child): become the sandbox user, with the caps applied.
        Runs in the child between fork and exec; raises if any step fails, so nothing runs as root."""
        hide_paths(self.hide)
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)
        if os.getuid() != self.uid or os.geteuid() != self.uid:
            raise SandboxError("could not drop privileges")
        os.umask(0o007)  # the run's users share one group: what one makes, the next (a resume) can use
        apply_limits()

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        env.update({"HOME": self.home, "USER": self.user, "LOGNAME": self.user,
                    ENV_SANDBOX: json.dumps(asdict(self))})
        return env

    def processes(self) -> list[int]:
        """Every process of this user and of its crash users."""
        uids = {self.uid, *(uid for uid, _ in self.crash_users)}
        return [pid for pid, uid in _all_processes() if uid in uids]

    def kill_all(self, timeout: float = 5.0) -> int:
        """SIGKILL every process of the sandbox user until none is left; returns how many died."""
        killed = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.processes()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        return killed

    def own(self, path: Path) -> None:
        """Give a folder (and what is in it) to the sandbox user: its scratch space. The group (the slot's
        own, shared only with its crash users) gets the same rights as the owner."""
        for root, dirs, files in os.walk(path):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.chown(name, self.uid, self.gid, follow_symlinks=False)
                if not os.path.islink(name):
                    mode = os.stat(name).st_mode & 0o7777
                    os.chmod(name, mode | ((mode & 0o700) >> 3))


def hide_paths(paths) -> None:
    """In a mount namespace of this process's own: an empty read-only tmpfs over each folder (the
    masters), /dev/null over each file (an answers module), and a /proc that shows only the process's own
    user (no grader command lines)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
        raise SandboxError(f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}")
    if libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) != 0:  # MS_REC | MS_PRIVATE
        raise SandboxError("cannot make the mount namespace private")
    for path in paths:
        if os.path.isdir(path):
            hidden = libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", 1, b"size=4k,mode=0555")  # MS_RDONLY
        elif os.path.exists(path):
            hidden = libc.mount(b"/dev/null", os.fsencode(path), None, 4096, None)  # MS_BIND
        else:
            continue
        if hidden != 0:
            raise SandboxError(f"cannot hide {path}: {os.strerror(ctypes.get_errno())}")
    libc.mount(b"proc", b"/proc", b"proc", 0x2 | 0x8 | 0x4, b"hidepid=2")  # nosuid, noexec, nodev


def can_hide() -> bool:
    """Whether this machine lets us make mount namespaces (a container without CAP_SYS_ADMIN does not).
    Tried in a throwaway child, so nothing here changes."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork: the child only makes one call
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(0x00020000) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


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


def current() -> Sandbox | None:
    """The sandbox this process was told to put untrusted children in, if any (inside
    :func:`crash_user`, that row's user)."""
    row = _crash_user.get()
    if row is not None:
        return row
    raw = os.environ.get(ENV_SANDBOX)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        data["hide"] = tuple(data.get("hide", ()))
        data["crash_users"] = tuple(tuple(pair) for pair in data.get("crash_users", ()))
        return Sandbox(**data)
    except (TypeError, ValueError):
        return None


_crash_user: contextvars.ContextVar = contextvars.ContextVar("crashlab_crash_user", default=None)
_crash_users_busy: set[int] = set()
_crash_users_free = threading.Condition()


@contextmanager
def crash_user(home: str | os.PathLike | None = None, hand_back: tuple = (), wait: float = 300.0):
    """Run everything a crashed run starts as a user of its own, and kill every process of that user
    when the block ends (and whenever :func:`kill_crashed` is called).

    A machine that crashes takes every process with it. An agent killed at a crash point must not leave
    a helper behind -- a double fork in a session of its own -- that finishes the order while the
    "resumed" process only waits: that would pass every matrix with no durable state at all. Process
    groups and sessions can be escaped; a uid cannot. So while grading as root each crash-matrix row
    (and each crashed run) borrows one of the slot's crash users, which share the sandbox user's group
    (files pass between the crashed run and its resume), and kills all of its processes after the crash.

    ``hand_back``: folders where a lone crashed run (not a whole row) left files that the sandbox user's
    next run resumes from; once the crash user's processes are dead, its files there become the
    sandbox user's (SQLite makes its files 0644 whatever the umask, so sharing a group is not enough).

    Yields the row's :class:`Sandbox`, or None when there is no sandbox (not grading as root): then
    nothing changes.
    """
    active = _crash_user.get()
    parent = current() if active is None else None
    if active is not None or parent is None or os.geteuid() != 0 or not parent.crash_users:
        yield active
        return
    deadline = time.monotonic() + wait
    with _crash_users_free:
        while True:
            free = [pair for pair in parent.crash_users if pair[0] not in _crash_users_busy]
            if free:
                uid, name = free[0]
                _crash_users_busy.add(uid)
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxError(f"all {len(parent.crash_users)} crash users stayed busy for {wait:.0f} s")
            _crash_users_free.wait(left)
    row = replace(parent, uid=uid, user=name, home=str(home or parent.home), crash_users=())
    token = _crash_user.set(row)
    try:
        row.kill_all()  # nothing of an earlier row's
        yield row
    finally:
        row.kill_all()
        _crash_user.reset(token)
        for folder in hand_back:
            _hand_back(folder, row.uid, parent)
        with _crash_users_free:
            _crash_users_busy.discard(uid)
            _crash_users_free.notify_all()


def _hand_back(folder, uid: int, to: Sandbox) -> None:
    """Give ``to`` every file of ``uid`` under ``folder``. Walked by directory descriptors, never
    following a symlink, so a folder swapped for a link mid-walk cannot point root's chown elsewhere."""
    libc = ctypes.CDLL(None, use_errno=True)
    previous = libc.setfsuid(0)  # the judge works with the sandbox user's file rights: root's, for this
    try:
        for _, _, _, dirfd in os.fwalk(folder, follow_symlinks=False):
            for name in [".", *os.listdir(dirfd)]:
                try:
                    if os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_uid == uid:
                        os.chown(name, to.uid, to.gid, dir_fd=dirfd, follow_symlinks=False)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        libc.setfsuid(previous)


def kill_crashed() -> None:
    """After a crash: kill every process the crashed run left, whatever session it moved to."""
    row = _crash_user.get()
    if row is not None:
        row.kill_all()


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child that runs student code: the sandbox user's home and name, when there is one."""
    sandbox = current()
    return env if sandbox is None else sandbox.env(env)


def preexec():
    """The ``preexec_fn`` for a child that runs student code: become the sandbox user when we are root
    and there is one; otherwise just apply the caps."""
    sandbox = current()
    return sandbox.demote if sandbox is not None and os.geteuid() == 0 else apply_limits


def give(path: Path) -> None:
    """Hand a folder to the sandbox user (when root and grading), so student code can use it. A process
    that already works with the sandbox user's file rights (the judge) owns what it makes: nothing to do."""
    sandbox = current()
    if sandbox is not None and os.geteuid() == 0:
        try:
            sandbox.own(path)
        except PermissionError:  # we work with the sandbox user's file rights (setfsuid): share by group
            share_with_group(path)


def share_with_group(path: Path) -> None:
    """What this process owns under ``path``, made usable by its group (the run's crash users)."""
    for root, dirs, files in os.walk(path):
        for name, mode in [(root, 0o2770)] + [(os.path.join(root, d), 0o2770) for d in dirs] \
                + [(os.path.join(root, f), 0o660) for f in files]:
            try:
                if not os.path.islink(name):
                    os.chmod(name, mode)
            except OSError:
                pass


def can_isolate() -> bool:
    return os.geteuid() == 0


class SandboxSlot:
    """Hold one sandbox user for a grading run (a file lock per slot), creating the user on demand."""

    def __init__(self, home: Path, hide: tuple = (), wait: float = 120.0):
        if not can_isolate():
            raise SandboxError("isolation needs root")
        self.hidden = bool(hide) and can_hide()
        if not self.hidden:
            hide = ()  # the uid still protects everything but what is world-readable (the masters)
        SLOT_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        deadline = time.monotonic() + wait
        self._lock = None
        while self._lock is None:
            for slot in range(SLOTS):
                handle = open(SLOT_DIR / f"slot{slot}.lock", "w")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                self._lock, self.slot = handle, slot
                break
            else:
                if time.monotonic() > deadline:
                    raise SandboxError(f"all {SLOTS} sandbox slots are busy")
                time.sleep(0.5)
        user = f"crashlab-sb{self.slot}"
        entry = _ensure_user(user)
        crash_users = tuple((_ensure_user(f"{user}c{k}", group=user).pw_uid, f"{user}c{k}") for k in range(CRASH_USERS))
        self.sandbox = Sandbox(entry.pw_uid, entry.pw_gid, user, str(home), tuple(str(p) for p in hide), crash_users)
        self.sandbox.kill_all()  # whatever a crashed earlier run left behind

    def close(self) -> None:
        if self._lock is not None:
            self.sandbox.kill_all()
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Sandbox:
        return self.sandbox

    def __exit__(self, *exc) -> None:
        self.close()


def _ensure_user(name: str, group: str | None = None) -> pwd.struct_passwd:
    """A system user, made on first use: with a group of its own, or in ``group`` (a crash user shares its
    slot user's group)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    grouping = ["--gid", group] if group else ["--user-group"]
    result = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                             "--shell", "/usr/sbin/nologin", *grouping, name],
                            capture_output=True, text=True)
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(f"cannot create the sandbox user {name}: {result.stderr.strip()}") from None


def _all_processes() -> list[tuple[int, int]]:
    """(pid, uid) of every live process. A zombie (dead, waiting for its parent to reap it) is left out:
    it runs nothing, and no signal can do more to it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            found.append((int(entry), uid))
    return found


# --- non-root: keep track of what the grader's children started ---------------------------------------------
def become_subreaper(on: bool = True) -> None:
    """Orphans of our children (a daemon, a double fork) are re-parented to us instead of init, so a
    grader that is not root can still find and kill everything a submission started. ``on=False`` ends
    it (and reaps what is dead), for a long-lived process that grades once, such as a test run: orphans
    it never reaps would otherwise stay behind as zombies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1 if on else 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass
    if not on:
        _reap()


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, _ in _all_processes():
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(root: int | None = None, keep: set[int] = frozenset(), rounds: int = 20) -> None:
    root = os.getpid() if root is None else root
    for _ in range(rounds):
        pids = [p for p in descendants(root) if p not in keep]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def set_fs_user(sandbox: Sandbox) -> None:
    """Do this process's file access with the sandbox user's rights (setfsuid), while keeping root's
    other powers (starting the world, signalling). A trusted check that writes into the student's
    folder then cannot be tricked by a symlink into writing a file the student could not write."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsgid(sandbox.gid)
    libc.setfsuid(sandbox.uid)
    if libc.setfsuid(-1) != sandbox.uid:  # setfsuid returns the previous value: read it back
        raise SandboxError("setfsuid failed")
