"""An exclusive ``flock`` taken within a deadline: the one wait shared by every lock the library holds on a file.

The kernel drops a lock when its holder dies, even by SIGKILL, so a crash never leaves a stale lock; what a waiter
must bound is only how long a live holder may keep it. The lock is polled (``LOCK_NB``) rather than blocked on, so
the wait has a deadline and the caller chooses the error that says whose lock it was.
"""

from __future__ import annotations

import fcntl
import time
from typing import IO, Callable


def lock_within(handle: IO, timeout: float, too_long: Callable[[], Exception], poll: float) -> None:
    """Take an exclusive lock on the open file ``handle``, trying every ``poll`` seconds; raise ``too_long()``
    once another process has held it for more than ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise too_long() from None
            time.sleep(poll)


__all__ = ["lock_within"]
