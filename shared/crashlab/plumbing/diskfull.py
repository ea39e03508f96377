"""A full disk, named as such. Without this, an ENOSPC surfaces as whatever it broke: a world whose ledger could
not be written closes the connection (the agent reports a lost acknowledgement), SQLite's "database or disk is
full" is wrapped as "not a readable SQLite database", a command prints a traceback. Each writer asks
:func:`disk_full` of the error it caught and says so in one line; what it was writing is not kept.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

SQLITE_FULL = 13  # sqlite3's result code for "database or disk is full"


def disk_full(exc: BaseException | None, where: str | os.PathLike | None = None) -> bool:
    """``exc``, or an error it was raised from, is a full disk: ENOSPC or EDQUOT (a quota counts as full for whoever
    writes), or SQLite's SQLITE_FULL. SQLite says "disk I/O error" instead when it cannot grow a file it maps
    (its WAL index): with ``where``, a path on the database's file system, such an error counts too when that file
    system has no block left."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        sqlite3 = sys.modules.get("sqlite3")  # not imported: the error cannot be SQLite's
        if sqlite3 is not None and isinstance(exc, sqlite3.Error):
            if getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL or "database or disk is full" in str(exc):
                return True
            if where is not None and str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_IOERR") \
                    and _no_room(where):
                return True
        exc = exc.__cause__ or exc.__context__
    return False


def _no_room(where: str | os.PathLike) -> bool:
    path = Path(where)
    while not path.exists() and path != path.parent:  # a file not made yet: its folder's file system
        path = path.parent
    try:
        return os.statvfs(path).f_bavail == 0
    except OSError:
        return False


def full_disk_message(what: str, exc: BaseException) -> str:
    """``cannot write X: the disk is full (No space left on device)``: ``what`` says what could not be written, the
    parenthesis what the system said (the error this one was raised from, if any)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    reason = getattr(exc, "strerror", None) or str(exc)
    return f"{what}: the disk is full ({reason})"


__all__ = ["disk_full", "full_disk_message"]
