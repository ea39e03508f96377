"""What the servers' plumbing leaves behind: nothing. A supervisor killed with SIGKILL takes its server with it, a
parent that dies stops its servers even while nobody has reaped it, and a port whose server died a moment ago counts
as free again although its connections are still in TIME_WAIT."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashlab.plumbing import supervisor
from crashlab.plumbing.ports import port_is_free


def gone(pid: int) -> bool:
    """No such process, or a zombie waiting for whoever adopted it to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_supervisor_killed_with_sigkill_takes_its_server_with_it(tmp_path):
    pid_file = tmp_path / "server.pid"
    server = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    process = subprocess.Popen(supervisor.command(stop_with_parent=False) + ["--", sys.executable, "-c", server],
                               start_new_session=True)
    child = None
    try:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert not gone(child)
        os.kill(process.pid, signal.SIGKILL)  # no chance to stop its server
        process.wait(10)
        for _ in range(100):
            if gone(child):
                break
            time.sleep(0.05)
        assert gone(child), "the server outlived its SIGKILLed supervisor"
    finally:
        for pid in (process.pid, child):  # whatever the outcome, nothing of this test is left running
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGKILL)
        process.wait(10)


def test_a_port_in_time_wait_is_free_for_the_next_server():
    """The old server listened as servers do (Go's listeners, Temporal's among them, set SO_REUSEADDR), so a new
    one may bind while its connections wait out TIME_WAIT; a probe that binds without it was refused."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server's side closes first: its end of the connection stays in TIME_WAIT
    client.close()
    listener.close()
    with socket.socket() as plain:  # what the probe used to do, and why it refused a port a server would get
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    assert port_is_free(port)
    with socket.socket() as server:  # and a server that binds as servers do gets it
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()


PARENT = """
import subprocess, sys, time
from crashlab.plumbing import supervisor
server = "import os, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
subprocess.Popen(supervisor.command() + ["--", sys.executable, "-c", "import sys\\n" + server, sys.argv[1]])
time.sleep(60)
"""


def test_a_server_stops_when_its_parent_dies_even_before_anyone_reaps_the_parent(tmp_path):
    """The parent dies and stays a zombie (its own parent, this test, does not wait for it): kill(pid, 0) still
    finds it, but the supervisor sees it was handed to another parent, and stops the server."""
    pid_file = tmp_path / "server.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file)], start_new_session=True)
    child = None
    try:
        for _ in range(300):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)  # and no wait(): a zombie
        for _ in range(200):
            if gone(child):
                break
            time.sleep(0.05)
        assert gone(child), "the server outlived the process that started it"
    finally:
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(10)
