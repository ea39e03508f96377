"""How a world's server process starts: a new interpreter, or forked from a warm launcher that the caller hands over.

A crash matrix starts a world for every row, and a new interpreter spends about 0.15 s of CPU importing the
server's modules; forked from the row's launcher (which imports them once), a world costs a fork. Either way the
server is a process of its own, in a session of its own, killed and restarted for real.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from crashlab.plumbing.processes import read_line
from crashlab.plumbing.scratch import make_scratch, remove_scratch
from crashlab.world.errors import WorldError

SERVER = "crashlab.world.server"
# What the server imports, for the launcher to import once: not the server module itself, which each fork runs as
# ``__main__`` (runpy warns of a module run that is imported already).
SERVER_IMPORTS = ("argparse", "http.server", "crashlab.world.services", "crashlab.world.policy",
                  "crashlab.world.crashes", "crashlab.world.faults", "crashlab.plumbing.diskfull")


def server_options(key_lease: float, key_lifetime: float | None, result_bytes: int) -> list[str]:
    """The server's options for these settings of ``World.start`` (see there), each checked first: a
    :class:`~crashlab.world.errors.WorldError` in one line for a value the server could not take."""
    if not key_lease > 0:
        raise WorldError(f"key_lease must be a positive number of seconds, got {key_lease!r}")
    if key_lifetime is not None and not (isinstance(key_lifetime, (int, float)) and not isinstance(key_lifetime, bool)
                                         and 0 < key_lifetime < float("inf")):
        raise WorldError(f"key_lifetime must be a positive number of seconds or None (never forget), "
                         f"got {key_lifetime!r}")
    if not (type(result_bytes) is int and 0 <= result_bytes <= 10_000_000):
        raise WorldError(f"result_bytes must be a number of characters from 0 to 10,000,000, got {result_bytes!r}")
    options = ["--key-lease", str(key_lease)]
    options += [] if key_lifetime is None else ["--key-lifetime", repr(float(key_lifetime))]
    return options + (["--result-bytes", str(result_bytes)] if result_bytes else [])


def start_server(args: list[str], env: dict[str, str], log_path: Path, timeout: float, launcher=None):
    """Start ``python -m crashlab.world.server ARGS``, its stderr appended to ``log_path`` (never through a link);
    returns the process, its stdout (kept open until the world stops, as a pipe's would be) and its first line
    (b"" if none came within ``timeout`` seconds or it exited first). ``launcher``: a running
    :class:`crashlab.harness.launcher.WarmLauncher` to fork it from, or None for a new interpreter."""
    if launcher is None:
        # O_NOFOLLOW: while grading, the world's folder belongs to the student, who may have planted a symlink
        with open(log_path, "ab", opener=lambda path, flags: os.open(path, flags | os.O_NOFOLLOW, 0o644)) as log:
            process = subprocess.Popen([sys.executable, "-P", "-m", SERVER, *args], stdout=subprocess.PIPE,
                                       stderr=log, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        return process, process.stdout, read_line(process.stdout, timeout)
    launcher.add_preload(SERVER_IMPORTS)
    folder = make_scratch("crashlab-world-out-")
    try:
        fifo = folder / "stdout"
        os.mkfifo(fifo, 0o600)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ours, until the line: no end of file before it opens
        stdout = os.fdopen(reader, "rb", buffering=0)
        try:
            process = launcher.spawn(args, os.getcwd(), env, fifo, log_path, module=SERVER)
            line = read_line(stdout, timeout, process)  # our write end is open: the server's exit ends the wait
        except BaseException:
            stdout.close()
            raise
        finally:
            os.close(writer)
    finally:
        remove_scratch(folder)  # both ends are open: the name is no longer needed
    return process, stdout, line
