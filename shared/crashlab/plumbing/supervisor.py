"""The tiny supervisor every server the course starts runs under: ``python -m crashlab.plumbing.supervisor
[--parent-pid PID] -- COMMAND...`` runs the server as its child and stops it when it gets SIGTERM or when the
process that started it dies, so a killed kernel or test run never leaves a server behind. A supervisor killed
with SIGKILL cannot stop anything: on Linux the server is then killed by the kernel (``PR_SET_PDEATHSIG``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from crashlab.plumbing.ports import pid_alive
from crashlab.plumbing.process_tree import die_with_parent


def command(stop_with_parent: bool = True) -> list[str]:
    """The supervisor's command line, to which the server's own follows after ``--``."""
    cmd = [sys.executable, "-P", "-m", "crashlab.plumbing.supervisor"]
    return cmd + ["--parent-pid", str(os.getpid())] if stop_with_parent else cmd


def stop_supervisor(process: subprocess.Popen, timeout: float) -> None:
    """SIGTERM to a supervisor (which stops its server), then SIGKILL to its process group."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)


def serve_until_interrupted(server) -> None:
    """A server's command line: keep it until Ctrl-C (or until it dies), then stop it."""
    try:
        while server._process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def supervise(argv: list[str]) -> int:
    """Run the server as a child; stop it when we get SIGTERM or when the parent pid dies."""
    parent = None
    if argv[:1] == ["--parent-pid"]:
        parent, argv = int(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent())
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while child.poll() is None and not stopping:
        # A dead parent that nobody has reaped yet still answers kill(pid, 0), but its children were handed to
        # another process the moment it died: a new parent pid says so at once.
        if parent is not None and (os.getppid() != parent or not pid_alive(parent)):
            break
        time.sleep(0.3)
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(8)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return child.returncode or 0



if __name__ == "__main__":
    raise SystemExit(supervise(sys.argv[1:]))


__all__ = ["command", "serve_until_interrupted", "stop_supervisor", "supervise"]
