"""Which processes are one agent run, told from outside the run.

A crash point is the run's: the world fires it only for a request that comes from the run under test, and a
point counts only if the run itself died of it. Otherwise a run can fork a decoy -- a child in a session of
its own -- that spends the point on a throwaway request while the real run never meets it. So the harness
marks each crashed run's processes before the first one runs any agent code, and the world checks the mark on
every process that holds the requesting connection. The mark must be one that a process of the run cannot shed
and no other process can put on, and that the world reads without asking the run: never a header, an
argument or an environment variable, which the agent writes itself (and which would tell a run it is under
test).

What marks a run, strongest first (where several are there, a process must carry each):

- a **cgroup** of its own (cgroup v2, where the harness may make one: as root, on a writable hierarchy with
  ``cgroup.kill``). The first process joins it between fork and exec, so all it starts is born in it; an
  unprivileged process cannot move out of it, whatever session it moves to, however often it forks; and
  ``cgroup.kill`` kills every member at once in the kernel, so no fork outruns the kill.
- the **crash user's uid**, grading as root (:func:`crashlab.plumbing.sandbox.crash_user` gives each crashed run a uid
  that no other process has while it runs): an unprivileged process cannot change its uid. The kill is
  ``kill(-1)`` sent as that uid, which the kernel applies to all of its processes at once.
- otherwise (not root: a learner's laptop), the **process tree**: the first process, every process below it
  and every process in its session, read from /proc. A process of the same user that double-forks out of
  the session escapes it, and nothing stops a process of the same user from signalling the world either:
  grading without root has nothing at stake, and says ``isolated: false``.
"""

from __future__ import annotations

import os
import pwd
import secrets
import signal
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from crashlab.plumbing.process_tree import descendants, process_table
from crashlab.plumbing.processes import kill_tree
from crashlab.plumbing.sandbox import kill_every_process_of
from crashlab.plumbing.sandbox_box import remove_cgroup_folder

CGROUP_PARENT = "crashlab-runs"  # the folder of the runs' cgroups, under the cgroup v2 hierarchy's root


@dataclass(frozen=True)
class RunScope:
    """One run's mark: ``cgroup`` (its cgroup v2 folder), ``uid`` (its crash user), or -- with neither --
    ``leader``, its first process, which the harness tells the world once it has started it."""

    cgroup: str | None = None
    uid: int | None = None
    leader: int | None = None

    @property
    def by_tree(self) -> bool:
        """True when only the process tree marks the run: the world then needs :attr:`leader` to tell."""
        return self.cgroup is None and self.uid is None

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> "RunScope":
        """The scope the harness sent; ValueError (one line) for anything else."""
        if not isinstance(data, dict) or set(data) - {"cgroup", "uid", "leader"}:
            raise ValueError(f"a run is {{'cgroup': PATH or null, 'uid': N or null, 'leader': PID or null}}, got {data!r}")
        cgroup, uid, leader = data.get("cgroup"), data.get("uid"), data.get("leader")
        if cgroup is not None and not (isinstance(cgroup, str) and os.path.isabs(cgroup)
                                       and os.path.basename(os.path.dirname(cgroup)) == CGROUP_PARENT
                                       and os.path.isfile(os.path.join(cgroup, "cgroup.kill"))):
            raise ValueError(f"the run's cgroup must be a folder of {CGROUP_PARENT} with cgroup.kill, got {cgroup!r}")
        for name, value in (("uid", uid), ("leader", leader)):
            if value is not None and not (type(value) is int and value > 0):
                raise ValueError(f"the run's {name} must be a positive integer, got {value!r}")
        return cls(cgroup, uid, leader)

    def led_by(self, pid: int) -> "RunScope":
        return replace(self, leader=pid)

    # --- what the world asks ------------------------------------------------------------------------------
    def holds(self, pids) -> bool:
        """Whether any of ``pids`` (the processes holding a request's connection) is one of the run's."""
        members = self.members()
        return any(pid in members for pid in pids)

    def made(self, owners: set[int]) -> bool:
        """Whether a connection whose holders cannot be seen (root without CAP_SYS_PTRACE reads no other user's
        /proc/PID/fd) was made by the run: only a run with a crash user of its own is told so, by the uid the kernel
        recorded as the socket's owner -- which a process of another user cannot take on, nor one of the run shed."""
        return self.uid is not None and bool(owners) and owners <= {self.uid}

    def members(self) -> set[int]:
        """The run's live processes now."""
        if self.by_tree:
            if self.leader is None:
                return set()
            table = process_table()
            tree = {pid for pid, (_, sid, _) in table.items() if sid == self.leader} | set(descendants(self.leader))
            return tree | ({self.leader} if self.leader in table else set())
        found: set[int] | None = None
        if self.cgroup is not None:
            found = _cgroup_members(self.cgroup)
        if self.uid is not None:
            of_uid = {pid for pid, (_, _, uid) in process_table().items() if uid == self.uid}
            found = of_uid if found is None else found & of_uid
        return found if found is not None else set()  # a scope is marked by its tree, cgroup or uid: never here

    def kill(self) -> list[int]:
        """SIGKILL every process of the run, whatever session it moved to. Returns the run's processes listed
        just before the kill, so the harness can tell whether its first process was among them."""
        listed = sorted(self.members())
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
        if self.uid is not None:
            kill_user(self.uid)
        if self.by_tree and self.leader is not None:
            if os.path.exists(f"/proc/{self.leader}"):  # not reaped: its id is still the leader's
                kill_tree(self.leader)
            for pid in listed:
                _kill(pid)
        return listed

    # --- what the harness does ----------------------------------------------------------------------------
    def preexec(self, then):
        """A ``preexec_fn`` that joins the run's cgroup, then calls ``then`` (the sandbox's demotion): the
        agent's first line of code already runs inside it."""
        def join_then():
            if self.cgroup is not None:
                join_cgroup(self.cgroup)
            then()
        return join_then


@contextmanager
def run_scope(uid: int | None = None):
    """The scope of one crashed run: its own cgroup where this process may make one, ``uid`` (the crash user,
    or None); when the block ends, whatever of the run is left is killed and the cgroup removed."""
    cgroup = make_cgroup()
    scope = RunScope(cgroup=cgroup, uid=uid)
    try:
        yield scope
    finally:
        if cgroup is not None:
            remove_cgroup(cgroup)


# --- cgroup v2 ------------------------------------------------------------------------------------------------
def cgroup_root() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` or, on a hybrid system,
    ``/sys/fs/cgroup/unified``), or None."""
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1].replace("\\040", " ")
    except OSError:
        pass
    return None


def make_cgroup() -> str | None:
    """A new cgroup for one run, or None where this process cannot make one that can be killed at once (not
    root, no cgroup v2, a read-only hierarchy as in most containers, a kernel before 5.14)."""
    root = cgroup_root()
    if root is None or os.geteuid() != 0:
        return None
    parent = os.path.join(root, CGROUP_PARENT)
    _remove_stale(parent)
    path = os.path.join(parent, f"run-{secrets.token_hex(6)}")
    try:
        os.makedirs(path, mode=0o755)
    except OSError:
        return None
    if not os.path.isfile(os.path.join(path, "cgroup.kill")):
        remove_cgroup(path)
        return None
    return path


def join_cgroup(path: str) -> None:
    """Move this process into the cgroup at ``path`` (between fork and exec: it starts nothing before)."""
    with open(os.path.join(path, "cgroup.procs"), "w") as procs:
        procs.write("0")


def kill_cgroup(path: str) -> None:
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as kill:
            kill.write("1")
    except OSError:
        pass


def remove_cgroup(path: str, timeout: float = 0.5) -> None:
    """Kill what is left in the cgroup, wait a moment until it is empty, and remove it. A killed process that
    nobody has reaped yet (an orphan of a grader that is a subreaper) keeps its cgroup busy for a while: rather
    than hold up the run, such a cgroup is left, empty, for a later :func:`make_cgroup` to remove."""
    remove_cgroup_folder(path, timeout, before=lambda: kill_cgroup(path))


def _remove_stale(parent: str, age: float = 600.0) -> None:
    """Remove the runs' cgroups that are empty and older than ``age`` seconds (left by :func:`remove_cgroup`, or
    by a harness killed mid-run). A live run's cgroup is never that old and empty: it is made just before its
    first process starts, which joins it at once."""
    try:
        entries = [entry for entry in os.scandir(parent) if entry.name.startswith("run-")]
    except OSError:
        return
    for entry in entries:
        try:
            if time.time() - entry.stat().st_mtime > age and "populated 0" in Path(entry.path, "cgroup.events").read_text():
                os.rmdir(entry.path)
        except OSError:
            continue


def _cgroup_members(path: str) -> set[int]:
    try:
        return {int(line) for line in Path(path, "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


# --- users ------------------------------------------------------------------------------------------------------
def kill_user(uid: int, timeout: float = 5.0) -> None:
    """SIGKILL every process of the crash user ``uid`` (we are root), as the user itself: ``kill(-1)`` reaches
    them all in one pass that no fork escapes (:func:`crashlab.plumbing.sandbox.kill_every_process_of`); again while one
    is still listed (between its signal and its exit)."""
    gid = pwd.getpwuid(uid).pw_gid
    deadline = time.monotonic() + timeout
    kill_every_process_of(uid, gid)
    while any(owner == uid for _, _, owner in process_table().values()) and time.monotonic() < deadline:
        time.sleep(0.02)
        kill_every_process_of(uid, gid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["RunScope", "run_scope", "make_cgroup", "join_cgroup", "kill_cgroup", "remove_cgroup", "cgroup_root",
           "kill_user"]
