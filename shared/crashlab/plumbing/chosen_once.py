"""A value a world chooses once and every process of it finds again: the Temporal namespace of a world, the
Restate service name and endpoint port of a world.

Agents that start together on a fresh world all ask at once. The choice is made under an exclusive lock on a
file beside it: whoever takes the lock first and finds nothing writes the value (to a file of its own, fsynced,
then renamed into place, so no reader ever sees half of it); everyone after it reads that value. The kernel drops
the lock of a process that dies, even by SIGKILL.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from crashlab.plumbing.flock import lock_within


def chosen_once(path: Path, choose: Callable[[], str], read: Callable[[str], object], *, timeout: float,
                held_too_long: Callable[[str], Exception]):
    """``read`` of the text stored at ``path``; the first caller stores ``choose()`` there. ``read`` turns the
    text into the value, or None for a file that holds none; ``held_too_long(lock_path)`` is the error raised
    when another process holds the lock for more than ``timeout`` seconds."""
    found = _read(path, read)
    if found:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        lock_within(lock, timeout, poll=0.01, too_long=lambda: held_too_long(lock.name))
        found = _read(path, read)  # chosen by whoever held the lock before us
        if not found:
            text = choose()
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            found = read(text)
    return found


def _read(path: Path, read: Callable[[str], object]):
    try:
        return read(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
