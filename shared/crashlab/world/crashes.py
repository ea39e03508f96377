"""Crash points decided and observed by the world, never by the agent.

The harness arms one crash point (``before:OP`` or ``after:OP``; OP is ``model#N`` or a tool name)
through the world's admin API. The agent is told nothing. When the world sees the request for OP:

- ``before:OP`` -- on the request's arrival, before anything commits;
- ``after:OP``  -- once the effect is committed (or the model's answer computed and logged), before the
  reply is delivered;

it SIGKILLs the process that sent the request together with its whole process group, records that
the point was reached, and drops the connection without a reply. ``model#N`` counts the model requests
the world has received since the point was armed, so it is the Nth model call of the run that is
killed. "Reached" is what the world saw, so an agent cannot fake reaching a point, and it cannot tell
a run that will be killed from one that will not.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from crashlab.processes import holders, kill_groups


class CrashPlan:
    def __init__(self, protected_pgids: set[int]):
        self._lock = threading.Lock()
        self._protected = set(protected_pgids)
        self.point: str | None = None
        self.reached: dict | None = None
        self._model_calls = 0

    def arm(self, point: str | None) -> None:
        with self._lock:
            self.point, self.reached, self._model_calls = point, None, 0

    def state(self) -> dict:
        with self._lock:
            return {"point": self.point, "reached": self.reached}

    def next_model_op(self) -> str:
        with self._lock:
            self._model_calls += 1
            return f"model#{self._model_calls}"

    def fire(self, when: str, op: str, client_port: int, server_port: int) -> bool:
        """Kill the requester if ``when:op`` is the armed point. True when it fired (send no reply)."""
        point = f"{when}:{op}"
        with self._lock:
            if self.point != point or self.reached is not None:
                return False
            pids = peer_pids(client_port, server_port)
            killed = kill_groups(pids, self._protected)
            self.reached = {"point": point, "at": time.time(), "pids": sorted(pids), "killed_pgids": killed}
            return True


def peer_pids(client_port: int, server_port: int) -> set[int]:
    """The processes that hold the client end of a loopback TCP connection (found through /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            try:
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if local_port == client_port and remote_port == server_port:
                inodes.add(fields[9])
    if not inodes:
        return set()
    return holders({f"socket:[{inode}]" for inode in inodes})
