"""The processes below this one, found and ended through /proc: for a grader that is not root, which has no
sandbox user whose processes it could kill all at once, and for anything that must end what it started."""

from __future__ import annotations

from typing import AbstractSet

import ctypes
import os
import signal
import threading
import time


def all_processes() -> list[tuple[int, int]]:
    """(pid, uid) of every live process. A zombie (dead, waiting for its parent to reap it) is left out:
    it runs nothing, and no signal can do more to it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            state = stat_fields(int(entry))[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            found.append((int(entry), uid))
    return found


def stat_fields(pid: int) -> list[bytes]:
    """``/proc/<pid>/stat`` from its third field on (the state first), split after the command name, which
    may hold spaces and ')'. Raises OSError when there is no such process."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot: stat's 22nd field), or None when there is no such
    process or it has exited (a zombie runs nothing and uses nothing). A pid and its start time name one
    process for good: the system may give the pid to another, never with the same start time."""
    try:
        fields = stat_fields(pid)
    except OSError:
        return None
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when the thread that forked it ends


def die_with_parent(sig: int = signal.SIGKILL, then=None):
    """A ``preexec_fn``: the child gets ``sig`` when the thread that starts it ends, however it ends -- SIGKILL
    included, which runs no cleanup of ours (Linux only; elsewhere nothing is set). ``then``: another
    ``preexec_fn`` run first (becoming the sandbox user): a change of user clears the setting, so it is made after.
    A parent that died before the setting took would never signal: the child then exits at once."""
    parent = os.getpid()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return then

    def preexec() -> None:
        if then is not None:
            then()
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:
            os._exit(1)
    return preexec


def exit_when_orphaned(poll: float = 0.3) -> None:
    """End this process as soon as its parent is gone. For a process that changes its file user (setfsuid), which
    clears :func:`die_with_parent`'s setting: a thread watches the parent pid instead (a new parent pid means the
    old one died, even while nobody has reaped it). Its own children set to die with it go too."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)
    threading.Thread(target=watch, name="exit-when-orphaned", daemon=True).start()


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
        reap()


def process_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, session id, real uid) of every live process (zombies left out). The real uid, from
    /proc/PID/status: the owner of /proc/PID is the effective uid, and root for a process that made itself
    undumpable, so an agent could not hide from a check of its uid that way."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = stat_fields(int(entry))
            with open(f"/proc/{entry}/status", "rb") as f:
                uid_line = next(line for line in f if line.startswith(b"Uid:"))
            if fields[0] != b"Z":
                table[int(entry)] = (int(fields[1]), int(fields[3]), int(uid_line.split()[1]))
        except (OSError, IndexError, ValueError, StopIteration):
            continue
    return table


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in process_table().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(root: int | None = None, keep: AbstractSet[int] = frozenset(), rounds: int = 20) -> None:
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
        reap()


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
