"""Crash points: named instants where the harness asks an agent process to die.

The model and tool clients call :func:`reach` just before and just after each operation. When the
point named in ``CRASHLAB_CRASH_AT`` is reached, the process writes a marker (so the harness can
tell a crash that happened from one that never came) and kills itself with SIGKILL: no cleanup,
no ``finally`` blocks, no flushed buffers -- like a power cut or an OOM kill.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter

ENV_CRASH_AT = "CRASHLAB_CRASH_AT"
ENV_CRASH_MARKER = "CRASHLAB_CRASH_MARKER"

_model_calls = Counter()


def next_model_op() -> str:
    """The op name of the next model call in this process: ``model#1``, ``model#2``, ..."""
    _model_calls["model"] += 1
    return f"model#{_model_calls['model']}"


def reach(when: str, op: str) -> None:
    """Die here if ``when:op`` is the crash point this process was started with."""
    point = f"{when}:{op}"
    if os.environ.get(ENV_CRASH_AT) != point:
        return
    marker = os.environ.get(ENV_CRASH_MARKER)
    if marker:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, f"{point}\n".encode())
        os.fsync(fd)
        os.close(fd)
    sys.stderr.write(f"[crashlab] crash point {point} reached: SIGKILL (pid {os.getpid()})\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
