"""The given half of lesson 1's event log: appending a record, and the error a damaged log raises.

One JSON object per line, appended and fsynced. A record exists once its newline is on disk. Reading
the log back (and dropping a torn tail) is lesson 1's exercise, so it is not here: it lives in
:mod:`crashlab.answers.lesson01`, which graded lessons cannot import.
"""

from __future__ import annotations

import json
import os

from crashlab.errors import DiskFull, CrashlabError
from crashlab.plumbing.diskfull import disk_full, full_disk_message


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
