"""A fixture agent that starts four sleeping processes and then hangs, before its first model call.

One child stays in the agent's process group; one moves to a session of its own, as a server an
agent starts would; one is a daemon (a double fork: its parent has exited, so it is no longer the
agent's descendant). These three inherit the agent's stdout and stderr, so a harness that reads those
pipes to their end waits as long as any of them lives. The fourth is in a session of its own with
its output elsewhere: nothing points to it but being the agent's child. Their pids are written to
the file named by $HANG_CHILD_PIDS, so a test can check that none outlives the run.
"""

import os
import subprocess
import sys
import time

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def daemon() -> int:
    """A grandchild in a session of its own whose parent is gone; returns its pid."""
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execv(sys.executable, SLEEP)
        os.write(write, str(grandchild).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(middle, 0)
    with os.fdopen(read) as answer:
        return int(answer.read())


if __name__ == "__main__":
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
    pids = [subprocess.Popen(SLEEP).pid, subprocess.Popen(SLEEP, start_new_session=True).pid, daemon(),
            subprocess.Popen(SLEEP, **quiet).pid]
    with open(os.environ["HANG_CHILD_PIDS"], "w") as f:
        f.write(" ".join(map(str, pids)))
    print("started four sleepers", flush=True)
    time.sleep(120)
