"""The given half of lesson 1's event log: appending a record, and the error a damaged log raises.

One JSON object per line, appended and fsynced. A record exists once its newline is on disk. Reading
the log back (and dropping a torn tail) is lesson 1's exercise, so it is not here: it lives in
:mod:`crashlab.answers.lesson01`, which graded lessons cannot import.
"""

from __future__ import annotations

import json
import os


class CorruptLogError(RuntimeError):
    """A complete line of the log cannot be read: the log was damaged, not merely cut short."""


def append_event(path: str | os.PathLike, event: dict) -> None:
    """Append one event as one line and fsync it; cut off a torn tail first so nothing glues onto it."""
    line = (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")
    with open(path, "ab+") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.seek(0)
                f.truncate(f.read().rfind(b"\n") + 1)
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
