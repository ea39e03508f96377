"""The given half of lesson 1's event log: appending a record, the error a damaged log raises, and the order's
lock.

One JSON object per line, appended and fsynced. A record exists once its newline is on disk. Reading
the log back (and dropping a torn tail) is lesson 1's exercise, so it is not here: it lives in
:mod:`crashlab.answers.lesson01`, which graded lessons cannot import.

The lock (:func:`order_lock`) lets resume processes started at once take turns on one order's log instead of
racing. It is an ``flock`` on a file in the state directory, which the kernel releases when its holder dies, even
by SIGKILL, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path

from crashlab.errors import AgentError, CrashlabError, DiskFull
from crashlab.plumbing.diskfull import disk_full, full_disk_message
from crashlab.plumbing.flock import lock_within


class CorruptLogError(CrashlabError, RuntimeError):
    """A complete line of the log cannot be read: the log was damaged, not merely cut short."""


def append_event(path: str | os.PathLike, event: dict) -> None:
    """Append one event as one line and fsync it; cut off a torn tail first so nothing glues onto it. On a full
    disk, :class:`~crashlab.errors.DiskFull`, and what was written of the line is cut off again: the log ends
    where it ended before."""
    line = (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")
    with open(path, "ab+", buffering=0) as f:  # unbuffered: nothing is left to flush (and fail) at close
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.seek(0)
                size = f.readall().rfind(b"\n") + 1
                f.truncate(size)
        try:
            written = 0
            while written < len(line):
                written += f.write(line[written:])
            os.fsync(f.fileno())
        except OSError as exc:
            if not disk_full(exc):
                raise
            try:
                f.truncate(size)
            except OSError:
                pass  # a torn tail then, which the next append and every reader drop
            raise DiskFull(full_disk_message(f"cannot append to the log {path}", exc)) from None


class OrderLocked(AgentError):
    """Another process held the order's lock for longer than the wait allowed."""


@contextmanager
def order_lock(path: Path, timeout: float = 60.0):
    """Hold an exclusive lock on ``path`` (one writer per order). Waits up to ``timeout`` seconds."""
    with open(path, "a+") as handle:
        lock_within(handle, timeout, poll=0.02,
                    too_long=lambda: OrderLocked(f"another process has held the lock {path} for {timeout:.0f} s"))
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
