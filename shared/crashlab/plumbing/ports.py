"""Free loopback ports, and whether a process still lives: what every server the course starts needs.

A free port is only free until someone binds it: between :func:`free_port` and the server's own bind another
process can take it. The servers' starters therefore retry with new ports when the server says "address
already in use" (:func:`retry_on_taken_port`), instead of failing a lesson on a machine that is busy.
"""

from __future__ import annotations

import os
import socket
from typing import AbstractSet, Callable, TypeVar

from crashlab.errors import CrashlabError

T = TypeVar("T")


class PortTaken(CrashlabError, RuntimeError):
    """A server could not bind a port it was given: another process took it first."""


def port_number(text: str) -> int:
    """An argparse ``type=`` for a server's ``--port``: a whole number from 0 (any free port) to 65535, or one line
    saying what is wrong (a socket would raise OverflowError, a traceback, for 70000)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 1 and 65535 (0: any free one), got {text!r}")
    return value


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now. The probe binds as the servers do, with SO_REUSEADDR: a
    port whose last server died seconds ago still has connections in TIME_WAIT, which would refuse a plain bind
    although the server's own bind succeeds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", avoid: AbstractSet[int] = frozenset()) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in avoid and port + 1000 < 65536:
            return port
    raise PortTaken("could not find a free port on 127.0.0.1")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``port`` (it answers a connect): where :func:`port_is_free` asks
    whether this process could bind it, this asks whether a server is up there."""
    with socket.socket() as s:
        return s.connect_ex((host, port)) == 0


def retry_on_taken_port(start: Callable[[], T], attempts: int = 3) -> T:
    """``start()``, again with fresh ports (``start`` picks them) while it raises :class:`PortTaken`."""
    for attempt in range(attempts):
        try:
            return start()
        except PortTaken:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


__all__ = ["PortTaken", "free_port", "pid_alive", "port_is_free", "port_taken", "retry_on_taken_port"]
