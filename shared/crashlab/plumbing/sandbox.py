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
import json
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Iterable

# Re-exported: the grader reaches the process tree through the sandbox when it has no sandbox user.
from crashlab.plumbing.process_tree import all_processes, become_subreaper, descendants, kill_descendants  # noqa: F401
from crashlab.plumbing.sandbox_box import join_cgroups
from crashlab.plumbing.sandbox_users import (MEMORY_LIMIT, PROCESS_LIMIT, SandboxError, apply_limits,  # noqa: F401
                                             hand_back, kill_every_process_of, no_new_privileges, own_tree,
                                             set_fs_ids, share_with_group)
from crashlab.plumbing.sandbox_view import enter_view, hide_only

ENV_SANDBOX = "CRASHLAB_SANDBOX"
ENV_GRADING_LESSON = "CRASHLAB_GRADING_LESSON"  # set by the grader for every process of a grading run
SLOTS = 8
CRASH_USERS = 4                   # users of a slot's own for crashed runs (one per crash-matrix row at a time)
SLOT_DIR = Path("/run/crashlab-sandbox")
VIEW_ROOT = SLOT_DIR / "view"     # where each sandboxed process builds its own view (see crashlab.plumbing.sandbox_view)


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


def launcher_env(env: dict[str, str], *, engines: Iterable[str]) -> dict[str, str]:
    """The environment a warm launcher starts with: :func:`student_env` of ``env`` (``engines``: the engines'
    names), whoever asks. Every agent it forks inherits its memory -- its stack, where the environment it was
    started with stays whatever it sets afterwards -- so it never holds the grader's own variables; each child is
    given its own environment."""
    return {k: v for k, v in student_env(env, engines=engines).items() if k not in (ENV_SANDBOX, ENV_GRADING_LESSON)}


@dataclass(frozen=True)
class Sandbox:
    uid: int
    gid: int
    user: str
    home: str
    hide: tuple = ()  # what the student must not read: the masters' folder, the answers being graded
    crash_users: tuple = ()  # (uid, name) pairs: see :func:`crash_user`
    see: tuple = ()  # the grading run's folders: with the runtime, all a sandboxed process sees of the machine
    cgroups: tuple = ()  # the grading's memory and pids cgroups (crashlab.plumbing.sandbox_box.Limits)
    ipc: bool = False  # an IPC namespace and a /dev/shm of its own for each process tree (where the machine allows)
    network: bool = False  # a network namespace with nothing in it: a process that must reach no server
    reference: dict | None = None  # the sandbox of the runs on the reference answers (see reference_runs)

    @classmethod
    def from_json(cls, data: dict) -> "Sandbox":
        data = {k: v for k, v in data.items() if k in {f.name for f in fields(cls)}}
        for name in ("hide", "see", "cgroups"):
            data[name] = tuple(data.get(name, ()))
        data["crash_users"] = tuple(tuple(pair) for pair in data.get("crash_users", ()))
        return cls(**data)

    # --- what a child process needs --------------------------------------------------------------
    def demote(self) -> None:
        """For ``preexec_fn`` (or a forked child): become the sandbox user, with the caps applied.
        Runs in the child between fork and exec; raises if any step fails, so nothing runs as root."""
        set_fs_ids(0, 0)  # a judge works with the student's file rights (setfsuid): these steps need root's
        join_cgroups(self.cgroups)  # as root, before anything of the student's runs: all it starts is born there
        if self.see:
            enter_view(str(VIEW_ROOT), tuple(self.see), tuple(self.hide), self.network, self.ipc)
        elif self.hide:
            hide_only(self.hide, self.network, self.ipc)
        no_new_privileges()
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
        if self.see and env.get("TMPDIR") and not any(_within(env["TMPDIR"], folder) for folder in self.see):
            env["TMPDIR"] = "/tmp"  # a folder it does not see (the student's, for a reference run): its own /tmp
        return env

    @property
    def uids(self) -> tuple[int, ...]:
        """This user, its crash users, and the reference runs' users."""
        ref = Sandbox.from_json(self.reference).uids if self.reference else ()
        return (self.uid, *(uid for uid, _ in self.crash_users), *ref)

    def processes(self) -> list[int]:
        """Every process of this user, its crash users and the reference runs' users."""
        uids = set(self.uids)
        return [pid for pid, uid in all_processes() if uid in uids]

    def kill_all(self, timeout: float = 5.0) -> int:
        """SIGKILL every process of the sandbox user, its crash users and the reference runs' users until none is
        left; returns how many were alive when it began.

        Listing the processes and then killing the list loses to a process that forks and exits faster than
        the list is read (its new pid is on no list). ``kill(-1, SIGKILL)`` sent *as the user* reaches every
        process of that uid in one pass of the kernel's process table, which a fork cannot slip through (a fork
        under way when the signal comes is abandoned), and spares the sender itself: so a throwaway shell
        becomes each user and sends it, always, and again while a listing still shows a process."""
        found = len(self.processes())
        deadline = time.monotonic() + timeout
        for uid in self.uids:  # never skipped on an empty listing: a process that hops pids is on no list
            kill_every_process_of(uid, self.gid)
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.02)
            for uid in self.uids:
                kill_every_process_of(uid, self.gid)
        return found

    def own(self, path: Path) -> None:
        """Give a folder (and what is in it) to the sandbox user: its scratch space. The group (the slot's
        own, shared only with its crash users) gets the same rights as the owner. Never through a link."""
        own_tree(path, self.uid, self.gid)


_reference = threading.Event()  # set while the grader runs code on the reference answers (reference_runs)


def _within(path: str, folder: str) -> bool:
    return os.path.abspath(path) == os.path.abspath(folder) or \
        os.path.abspath(path).startswith(os.path.abspath(folder).rstrip("/") + "/")


def current(student: bool = False) -> Sandbox | None:
    """The sandbox this process was told to put untrusted children in, if any (inside :func:`crash_user`, that
    row's user; inside :func:`reference_runs`, the reference runs' user, unless ``student``)."""
    row = _crash_user.get()
    if row is not None and not student:
        return row
    raw = os.environ.get(ENV_SANDBOX)
    if not raw:
        return None
    try:
        sandbox = Sandbox.from_json(json.loads(raw))
    except (TypeError, ValueError):
        return None
    if _reference.is_set() and sandbox.reference and not student:
        return Sandbox.from_json(sandbox.reference)
    return sandbox


def in_reference_runs() -> bool:
    return _reference.is_set()


@contextmanager
def reference_runs():
    """While the block runs, everything started for the student's code -- agents, crashed runs and their crash
    users, the folders handed over -- runs as the grading's *reference user* (``crashlab-sbNr`` and its own crash
    users, in a group of their own): the runs of the student's agent on the master's answers to earlier exercises.
    Such a run holds those answers; as a user of its own it can leave nothing where the student's other processes
    could read it or that they wrote (their folder, their files), and its view of the machine is its own folder
    (see :mod:`crashlab.grading.references`). All of its processes are killed when the block ends. Outside
    grading as root it changes nothing."""
    sandbox = current(student=True)
    _reference.set()
    try:
        yield current()
    finally:
        _reference.clear()
        if sandbox is not None and sandbox.reference and os.geteuid() == 0:
            Sandbox.from_json(sandbox.reference).kill_all()


_crash_user: contextvars.ContextVar = contextvars.ContextVar("crashlab_crash_user", default=None)
_crash_users_busy: set[int] = set()
_crash_users_free = threading.Condition()
_hand_back = hand_back  # crash_user's parameter of that name shadows it


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
    row = replace(parent, uid=uid, user=name, home=str(home or parent.home), crash_users=(), reference=None)
    token = _crash_user.set(row)
    try:
        row.kill_all()  # nothing of an earlier row's
        yield row
    finally:
        row.kill_all()
        _crash_user.reset(token)
        for folder in hand_back:
            _hand_back(folder, row.uid, parent.uid, parent.gid)
        with _crash_users_free:
            _crash_users_busy.discard(uid)
            _crash_users_free.notify_all()


def kill_crashed() -> None:
    """After a crash: kill every process the crashed run left, whatever session it moved to."""
    row = _crash_user.get()
    if row is not None:
        row.kill_all()


def child_env(env: dict[str, str], *, engines: Iterable[str], student: bool = False) -> dict[str, str]:
    """``env`` for a child that runs student code. While grading, what the caller merely inherited from this
    process passes only through :func:`student_env` (with ``engines``, the engines' names); what the caller set
    itself (a lesson's ``DURABILITY=sync`` for one run) is kept, since a trusted caller chose it. When there is a
    sandbox user, its home and name are set (``student``: the student's own, even inside :func:`reference_runs`).
    Outside grading (a learner running their own agents) it is the learner's own environment, untouched."""
    sandbox = current(student)
    if sandbox is None and not grading():
        return env
    inherited = os.environ
    chosen = {k: v for k, v in env.items() if inherited.get(k) != v}
    kept = {**student_env(env, engines=engines), **chosen}
    return sandbox.env(kept) if sandbox is not None else kept


def preexec(hide_also: tuple = (), student: bool = False, network: bool | None = None):
    """The ``preexec_fn`` for a child that runs student code: become the sandbox user when we are root
    and there is one; otherwise just apply the caps. ``hide_also``: more folders or files this child must not
    see (they must exist when it starts). ``student``: the student's own user even inside :func:`reference_runs`;
    ``network``: True for a network namespace with nothing in it (None: the sandbox's own choice)."""
    sandbox = current(student)
    if sandbox is None or os.geteuid() != 0:
        return apply_limits
    if hide_also:
        sandbox = replace(sandbox, hide=(*sandbox.hide, *(str(p) for p in hide_also)))
    if network is not None:
        sandbox = replace(sandbox, network=network)
    return sandbox.demote


def give(path: Path) -> None:
    """Hand a folder to the sandbox user (when root and grading), so student code can use it. A process
    that works with the sandbox user's file rights (the judge) owns what it makes: it shares it with the group."""
    from crashlab.plumbing.sandbox_users import fs_ids

    sandbox = current()
    if sandbox is not None and os.geteuid() == 0:
        if fs_ids()[0] == 0:
            sandbox.own(path)
        else:  # we work with the sandbox user's file rights (setfsuid): share by group
            share_with_group(path)


def can_isolate() -> bool:
    return os.geteuid() == 0


def set_fs_user(sandbox: Sandbox) -> None:
    """Do this process's file access with the sandbox user's rights (setfsuid), while keeping root's
    other powers (starting the world, signalling). A trusted check that writes into the student's
    folder then cannot be tricked by a symlink into writing a file the student could not write."""
    set_fs_ids(sandbox.uid, sandbox.gid)
