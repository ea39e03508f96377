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
import json
import os
import resource
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterable

# Re-exported: the grader reaches the process tree through the sandbox when it has no sandbox user.
from crashlab.errors import CrashlabError
from crashlab.plumbing.process_tree import all_processes, become_subreaper, descendants, kill_descendants  # noqa: F401
from crashlab.plumbing.sandbox_view import enter_view, hide_only

ENV_SANDBOX = "CRASHLAB_SANDBOX"
ENV_GRADING_LESSON = "CRASHLAB_GRADING_LESSON"  # set by the grader for every process of a grading run
SLOTS = 8
CRASH_USERS = 4                   # users of a slot's own for crashed runs (one per crash-matrix row at a time)
SLOT_DIR = Path("/run/crashlab-sandbox")
VIEW_ROOT = SLOT_DIR / "view"     # where each sandboxed process builds its own view (see crashlab.plumbing.sandbox_view)
MEMORY_LIMIT = 6 * 1024 ** 3      # bytes of address space per process
PROCESS_LIMIT = 768               # processes and threads of the sandbox user, all together


class SandboxError(CrashlabError, RuntimeError):
    pass


# What a student's process may inherit, by name: what the lesson's code needs to run (where Python and its
# packages are, the locale, the world's endpoints, its own folders), and nothing of the grader's own (a token, a
# key, the bundle's secret, the folder it was started from). An allow-list, not a deny-list: a secret under a name
# nobody thought of stays behind too. The engines' endpoints and binaries are allowed too, but named by the engine
# registry, a layer above this one: the callers pass them in (``engines``, crashlab.engines.registry.student_env()).
STUDENT_ENV = frozenset({
    "PATH", "PYTHONPATH", "LANG", "LANGUAGE", "TZ", "TERM", "HOME", "USER", "LOGNAME", "TMPDIR",
    "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONWARNINGS",
    "MPLCONFIGDIR", "MPLBACKEND", "JUPYTER_RUNTIME_DIR", "JUPYTER_PLATFORM_DIRS",
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS",  # this machine's numerical libraries need them
    "CRASHLAB_MODEL_URL", "CRASHLAB_SERVICES_URL", "CRASHLAB_STATE_DIR", "CRASHLAB_MODEL",
    "CRASHLAB_LESSON_FILES", ENV_GRADING_LESSON, ENV_SANDBOX,
})


def student_env(env: dict[str, str], *, engines: Iterable[str]) -> dict[str, str]:
    """``env`` cut down to what a student's process may see (:data:`STUDENT_ENV`, the engines' names in ``engines``,
    and the ``LC_*`` locale)."""
    allowed = STUDENT_ENV | frozenset(engines)
    return {k: v for k, v in env.items() if k in allowed or k.startswith("LC_")}


def grading() -> bool:
    """Whether this process works for a grading run (isolated or not): its untrusted children then start from
    :func:`student_env`, never from this process's environment."""
    return bool(os.environ.get(ENV_GRADING_LESSON)) or os.environ.get(ENV_SANDBOX) is not None


@dataclass(frozen=True)
class Sandbox:
    uid: int
    gid: int
    user: str
    home: str
    hide: tuple = ()  # what the student must not read: the masters' folder, the answers being graded
    crash_users: tuple = ()  # (uid, name) pairs: see :func:`crash_user`
    see: tuple = ()  # the grading run's folders: with the runtime, all a sandboxed process sees of the machine

    # --- what a child process needs --------------------------------------------------------------
    def demote(self) -> None:
        """For ``preexec_fn`` (or a forked child): become the sandbox user, with the caps applied.
        Runs in the child between fork and exec; raises if any step fails, so nothing runs as root."""
        if self.see:
            enter_view(str(VIEW_ROOT), tuple(self.see), tuple(self.hide))
        elif self.hide:
            hide_only(self.hide)
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
        return [pid for pid, uid in all_processes() if uid in uids]

    def kill_all(self, timeout: float = 5.0) -> int:
        """SIGKILL every process of the sandbox user and its crash users until none is left; returns how many
        were alive when it began.

        Listing the processes and then killing the list loses to a process that forks and exits faster than
        the list is read (its new pid is on no list). ``kill(-1, SIGKILL)`` sent *as the user* reaches every
        process of that uid in one pass of the kernel's process table, which a fork cannot slip through (a fork
        under way when the signal comes is abandoned), and spares the sender itself: so a throwaway shell
        becomes each user and sends it, always, and again while a listing still shows a process."""
        found = len(self.processes())
        deadline = time.monotonic() + timeout
        uids = (self.uid, *(uid for uid, _ in self.crash_users))
        for uid in uids:  # never skipped on an empty listing: a process that hops pids is on no list
            kill_every_process_of(uid, self.gid)
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.02)
            for uid in uids:
                kill_every_process_of(uid, self.gid)
        return found

    def own(self, path: Path) -> None:
        """Give a folder (and what is in it) to the sandbox user: its scratch space. The group (the slot's
        own, shared only with its crash users) gets the same rights as the owner."""
        for root, dirs, files in os.walk(path):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.chown(name, self.uid, self.gid, follow_symlinks=False)
                if not os.path.islink(name):
                    mode = os.stat(name).st_mode & 0o7777
                    os.chmod(name, mode | ((mode & 0o700) >> 3))


# ``kill`` is the shell's builtin: the shell's own process is the only one of the user that the signal spares.
# A zombie (dead, not yet reaped) still counts as signalled, so the loop is bounded; the caller checks again.
_KILL_AS_USER = 'i=0; while kill -s KILL -- -1 2>/dev/null; do i=$((i+1)); [ "$i" -ge 20 ] && exit 0; done; exit 0'


def kill_every_process_of(uid: int, gid: int) -> None:
    """SIGKILL every process of ``uid`` at once, by becoming it (see :meth:`Sandbox.kill_all`). Root only."""
    if uid == 0:
        raise SandboxError("refusing to kill every process of root")
    try:
        subprocess.run(["/bin/sh", "-c", _KILL_AS_USER], user=uid, group=gid, extra_groups=[], env={},
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    except (OSError, subprocess.SubprocessError):
        pass  # the caller lists what is left and tries again


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
        data["see"] = tuple(data.get("see", ()))
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


def child_env(env: dict[str, str], *, engines: Iterable[str]) -> dict[str, str]:
    """``env`` for a child that runs student code. While grading, what the caller merely inherited from this
    process passes only through :func:`student_env` (with ``engines``, the engines' names); what the caller set
    itself (a lesson's ``DURABILITY=sync`` for one run) is kept, since a trusted caller chose it. When there is a
    sandbox user, its home and name are set. Outside grading (a learner running their own agents) it is the
    learner's own environment, untouched."""
    sandbox = current()
    if sandbox is None and not grading():
        return env
    inherited = os.environ
    chosen = {k: v for k, v in env.items() if inherited.get(k) != v}
    kept = {**student_env(env, engines=engines), **chosen}
    return sandbox.env(kept) if sandbox is not None else kept


def preexec(hide_also: tuple = ()):
    """The ``preexec_fn`` for a child that runs student code: become the sandbox user when we are root
    and there is one; otherwise just apply the caps. ``hide_also``: more folders or files this child must not
    see (they must exist when it starts)."""
    sandbox = current()
    if sandbox is None or os.geteuid() != 0:
        return apply_limits
    if hide_also:
        sandbox = replace(sandbox, hide=(*sandbox.hide, *(str(p) for p in hide_also)))
    return sandbox.demote


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


def set_fs_user(sandbox: Sandbox) -> None:
    """Do this process's file access with the sandbox user's rights (setfsuid), while keeping root's
    other powers (starting the world, signalling). A trusted check that writes into the student's
    folder then cannot be tricked by a symlink into writing a file the student could not write."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsgid(sandbox.gid)
    libc.setfsuid(sandbox.uid)
    if libc.setfsuid(-1) != sandbox.uid:  # setfsuid returns the previous value: read it back
        raise SandboxError("setfsuid failed")
