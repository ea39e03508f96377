"""Ending agent processes for certain: whole process groups, and waits that always end.

An agent can start processes of its own. Killing only the agent's pid leaves them running. Killing
its process group misses any that moved to a session of their own. And while any of them still holds
the agent's stdout or stderr pipe, reading that pipe to its end waits as long as they live, which
hangs a crash test for ever. So the harness kills the group, then every process below the agent,
then whatever still holds the pipes, and it never waits without a timeout. The servers a command starts
(the world's) are signalled as a group and read with a timeout for the same reasons.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import Iterator

from crashlab.plumbing.process_tree import start_time
from crashlab.plumbing.sandbox import descendants


GONE_AT_START = -1  # the start time to record for a process that had exited before it could be read


def born_of(pid: int) -> int:
    """The start time to keep for a process another process will reap: :func:`start_time`, or
    :data:`GONE_AT_START`."""
    born = start_time(pid)
    return GONE_AT_START if born is None else born


def still_ours(pid: int, born: int) -> bool:
    """Whether ``pid`` still names the process whose :func:`born_of` was ``born``, or one of its remains: a zombie
    not yet reaped, or no process at all (then the id is free while any member of its group lives, so a group
    signal reaches only ours). False once a live process with another start time holds the id: not ours."""
    now = start_time(pid)
    return now is None or now == born


def kill_group(pid: int, born: int | None = None) -> None:
    """SIGKILL the process group that ``pid`` leads (every agent runs in a group of its own).

    ``born``: :func:`born_of` the process, for one another process reaps (a warm launcher's child), whose id the
    system may give away before this process hears it has exited: nothing is signalled once the id names another
    process (:func:`still_ours`). Left out: the caller has not reaped ``pid``, so the id is still its own."""
    if born is not None and not still_ours(pid, born):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_groups(pids, protected: set[int]) -> list[int]:
    """SIGKILL each process's whole group; a process in a protected group (or in group 0 or 1) is killed
    alone. Returns the groups killed."""
    groups = []
    for pid in pids:
        try:
            group = os.getpgid(pid)
        except ProcessLookupError:
            continue
        try:
            if group in protected or group <= 1:
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(group, signal.SIGKILL)
                groups.append(group)
        except (ProcessLookupError, PermissionError):
            pass
    return groups


def kill_groups_of(pids) -> None:
    """SIGKILL each process's whole group; a process in our own group is killed alone."""
    kill_groups(pids, {os.getpgrp()})


def kill_tree(pid: int, born: int | None = None) -> None:
    """SIGKILL the group ``pid`` leads and the group of every process below it, even one that moved to a
    session of its own. The processes below are listed first, while they are still ``pid``'s children.
    ``born``: as for :func:`kill_group`."""
    if born is not None and not still_ours(pid, born):
        return
    below = descendants(pid)
    kill_group(pid)
    kill_groups_of(below)


def pipe_holders(process: subprocess.Popen) -> set[int]:
    """The processes other than this one that still hold ``process``'s stdout or stderr pipe."""
    wanted = set()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None and not pipe.closed:
            wanted.add(f"pipe:[{os.fstat(pipe.fileno()).st_ino}]")
    return holders(wanted, exclude=os.getpid())


def holders(targets: set[str], exclude: int | None = None) -> set[int]:
    """The processes (other than ``exclude``) with an open file descriptor whose /proc link reads as one
    of ``targets`` -- ``pipe:[INODE]``, ``socket:[INODE]`` -- found through /proc."""
    found = set()
    for entry in os.listdir("/proc") if targets else ():
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in targets:
                    found.add(int(entry))
                    break
            except OSError:
                continue
    return found


def collect(process: subprocess.Popen, grace: float = 2.0) -> tuple[str, str]:
    """``process.communicate()`` for a process that has been killed or has exited, bounded in time.

    If the pipes are still open after ``grace`` seconds, something the agent started holds them: it is
    killed with its group, and the pipes are read for another ``grace`` seconds. If even that is not
    enough, what was read so far is returned, with a note on stderr, and the pipes are closed."""
    try:
        return process.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        kill_groups_of(pipe_holders(process))
    try:
        return process.communicate(timeout=grace)
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = (_text(exc.output), _text(exc.stderr))
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    note = "[crashlab] output cut short: a process the agent started still holds its pipes and could not be killed"
    return stdout, f"{stderr}\n{note}\n"


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


__all__ = ["GONE_AT_START", "born_of", "still_ours", "kill_group", "kill_groups_of", "kill_tree", "pipe_holders",
           "collect"]


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the group ``pid`` leads (a world's server starts a session of its own); to ``pid`` alone
    if it leads none, such as a server started by hand from a shell."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@contextlib.contextmanager
def frozen(pid: int, seconds: float) -> Iterator[None]:
    """Freeze the group ``pid`` leads (SIGSTOP, as :func:`signal_group` sends it) for the block, and never much
    longer than ``seconds``: a thawing process of its own sends SIGCONT when they are up even if this process is
    killed meanwhile (a kernel SIGKILLed in a cell that paused a world), so the frozen server runs again and can see
    that its parent is gone. The block's end thaws it at once and ends the thawing process with its group."""
    thaw = subprocess.Popen([sys.executable, "-I", "-c", f"import signal, time\ntime.sleep({max(seconds, 0.0)})\n"
                             f"from crashlab.plumbing.processes import signal_group\n"
                             f"signal_group({pid}, signal.SIGCONT)"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    signal_group(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        signal_group(pid, signal.SIGCONT)
        kill_group(thaw.pid)  # not reaped yet, so its group is still its own
        thaw.wait()


def read_line(stream, timeout: float, process=None) -> bytes:
    """One line from a pipe, or b'' if none arrives within ``timeout`` seconds (or the pipe closes). With
    ``process`` (anything with ``poll()``), also b'' once it has exited with no line: for a pipe whose write end
    something else holds open, which then never closes."""
    deadline = time.monotonic() + timeout
    data = b""
    fd = stream.fileno()
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b""
        if not select.select([fd], [], [], remaining if process is None else min(remaining, 0.05))[0]:
            if process is None or process.poll() is not None:
                return b""
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return b""
        data += chunk
    return data
