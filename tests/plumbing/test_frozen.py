"""A frozen server is thawed on time even when whoever froze it is killed in the meantime."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from crashlab.plumbing.processes import frozen, kill_group


def state(pid: int) -> str:
    """The process's state letter from /proc (``T``: stopped)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def test_a_server_frozen_by_a_process_that_is_killed_runs_again_when_the_pause_is_up():
    server = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)"],
                              start_new_session=True)
    freezer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from crashlab.plumbing.processes import frozen
        with frozen({server.pid}, 1.0):
            print("frozen", flush=True)
            time.sleep(3600)  # killed in here, before the block can thaw it
        """)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert freezer.stdout.readline().strip() == "frozen"
        wait_for(lambda: state(server.pid) == "T", "the server never stopped")
        kill_group(freezer.pid)
        freezer.wait()
        wait_for(lambda: state(server.pid) != "T", "the server was left stopped after its freezer died")
    finally:
        for process in (freezer, server):  # the freezer too, if a check failed before it was killed
            if process.poll() is None:  # never signal a reaped process's id: it may be another's now
                kill_group(process.pid)
            process.wait()


def test_the_blocks_end_thaws_at_once_and_leaves_no_thawing_process():
    server = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)"],
                              start_new_session=True)
    try:
        before = set(os.listdir("/proc"))
        with frozen(server.pid, 3600):
            wait_for(lambda: state(server.pid) == "T", "the server never stopped")
        wait_for(lambda: state(server.pid) != "T", "the block's end left the server stopped")
        thawers = [p for p in set(os.listdir("/proc")) - before if p.isdigit() and _is_thawer(p, server.pid)]
        assert not thawers, "a thawing process outlived the block"
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _is_thawer(pid: str, target: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return f"({target}, signal.SIGCONT)".encode() in cmdline.read()
    except OSError:
        return False
