"""Where the machine gives a grading no view of its own (a container without CAP_SYS_ADMIN, as on Gradescope), the
files every user may read but the student's users must not -- the masters of a plain checkout, and the library's
answers to the lesson being graded, which ship because later lessons build on them -- are kept from those users by
a POSIX ACL entry each that grants them nothing.

An entry names one user, so it holds for this grading's users only: a grading of a later lesson in another slot,
whose agents import those answers, reads them as before. The entries are taken off when the grading ends, and a
slot clears its users' entries from the answers as it starts (a grader killed by SIGKILL leaves them on).
Entries of other users, and any ACL the file had, are kept.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from typing import Iterable

XATTR = "system.posix_acl_access"
VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF
LOCK = "/run/crashlab-sandbox/acl.lock"  # concurrent gradings change the same files' ACLs one at a time


def _entries(path: str) -> list[tuple[int, int, int]]:
    """(tag, permissions, id) of the file's ACL, or the three its mode stands for when it has none."""
    try:
        raw = os.getxattr(path, XATTR, follow_symlinks=False)
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise
        mode = os.lstat(path).st_mode
        return [(USER_OBJ, mode >> 6 & 7, NO_ID), (GROUP_OBJ, mode >> 3 & 7, NO_ID), (OTHER, mode & 7, NO_ID)]
    return [struct.unpack_from("<HHI", raw, offset) for offset in range(4, len(raw), 8)]


def _write(path: str, entries: list[tuple[int, int, int]]) -> None:
    named = [e for e in entries if e[0] in (USER, GROUP)]
    entries = [e for e in entries if e[0] != MASK]
    if not named:  # the mode says it all again; the group bits are what the mask showed
        try:
            os.removexattr(path, XATTR, follow_symlinks=False)
        except OSError as exc:
            if exc.errno != errno.ENODATA:
                raise
        return
    mask = next(perm for tag, perm, _ in entries if tag == GROUP_OBJ)
    for _, perm, _ in named:
        mask |= perm
    entries.append((MASK, mask, NO_ID))
    data = struct.pack("<I", VERSION) + b"".join(struct.pack("<HHI", *e) for e in sorted(entries, key=lambda e: e[:1] + e[2:]))
    os.setxattr(path, XATTR, data, follow_symlinks=False)


def _change(paths: Iterable, uids: Iterable[int], deny: bool) -> list[str]:
    uids = set(uids)
    done = []
    os.makedirs(os.path.dirname(LOCK), mode=0o700, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for path in map(str, paths):
            try:
                entries = [e for e in _entries(path) if not (e[0] == USER and e[2] in uids)]
                _write(path, entries + ([(USER, 0, uid) for uid in sorted(uids)] if deny else []))
                done.append(path)
            except OSError:
                continue  # gone, or a file system without ACLs: the caller says what it could not keep
    return done


def deny(paths: Iterable, uids: Iterable[int]) -> list[str]:
    """An entry that grants ``uids`` nothing on each of ``paths`` (a folder: nothing in it can be reached); returns
    the paths it was set on."""
    return _change(paths, uids, deny=True)


def allow(paths: Iterable, uids: Iterable[int]) -> None:
    """Take ``uids``' entries off ``paths`` again."""
    _change(paths, uids, deny=False)
