"""Crash points decided and observed by the world, never by the agent.

The harness arms one crash point (``before:OP`` or ``after:OP``; OP is ``model#N`` or a tool name) through the
world's admin API, together with the order under test and the run it is starting (a
:class:`crashlab.world.runscope.RunScope`). The agent is told nothing. When the world sees the request for OP:

- ``before:OP`` -- on the request's arrival, before anything commits;
- ``after:OP``  -- once the effect is committed (or the model's answer computed and logged), before the
  reply is delivered;

it kills the whole run -- every process it started, whatever session it moved to -- records that the point was
reached (with the run's processes it killed), and drops the connection without a reply. ``model#N`` counts the
model requests of the run for the order since the point was armed, so it is the Nth model call of the run that
is killed.

Only a request for the armed order, from one of the run's own processes, meets the point: a child the run forks
to send throwaway requests for another order (a decoy, to spend the point where it costs nothing) does not
reach it, and neither does a process outside the run. The requester is found from outside: the processes
holding the client end of the connection (/proc), each checked against the run's mark. "Reached" is what the
world saw, so an agent cannot fake reaching a point, and it cannot tell a run that will be killed from one that
will not.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from crashlab.plumbing.processes import holders
from crashlab.world.runscope import RunScope

LEADER_WAIT = 10.0  # seconds a request may wait for the harness to name a run's first process (tree scopes)


class Requester:
    """The processes behind one request's connection, looked up once (a /proc walk) and only if needed."""

    def __init__(self, client_port: int, server_port: int):
        self.ports = (client_port, server_port)
        self._pids: set[int] | None = None

    @property
    def pids(self) -> set[int]:
        if self._pids is None:
            self._pids = peer_pids(*self.ports)
        return self._pids


class CrashPlan:
    def __init__(self):
        self._lock = threading.Condition()
        self.point: str | None = None
        self.order_id: str | None = None
        self.run: RunScope | None = None
        self.reached: dict | None = None
        self._model_calls = 0

    def arm(self, point: str | None, order_id: str | None = None, run: RunScope | None = None) -> None:
        """Arm ``point`` for ``order_id`` and ``run`` (``None``: disarm)."""
        if point is not None and (order_id is None or run is None):
            raise ValueError("a crash point is armed for an order and a run")
        with self._lock:
            self.point, self.order_id, self.run = point, order_id, run
            self.reached, self._model_calls = None, 0
            self._lock.notify_all()

    def started(self, leader: int) -> None:
        """The harness started the run's first process (needed where only the process tree marks the run)."""
        with self._lock:
            if self.run is not None:
                self.run = self.run.led_by(leader)
                self._lock.notify_all()

    def state(self) -> dict:
        with self._lock:
            return {"point": self.point, "order_id": self.order_id, "reached": self.reached}

    def model_op(self, order_id: str | None, requester: Requester) -> str | None:
        """``model#N`` for a model request of the run for its order (N counts those only), else None."""
        with self._lock:
            if self.point is None or ":model#" not in self.point or self.reached is not None \
                    or not self._ours(order_id, requester):
                return None
            self._model_calls += 1
            return f"model#{self._model_calls}"

    def fire(self, when: str, op: str | None, order_id: str | None, requester: Requester) -> bool:
        """Kill the run if this request meets the armed point. True when it fired (send no reply)."""
        point = f"{when}:{op}"
        with self._lock:
            if op is None or self.point != point or self.reached is not None or not self._ours(order_id, requester):
                return False
            killed = self.run.kill()
            self.reached = {"point": point, "order_id": order_id, "at": time.time(), "pids": sorted(requester.pids),
                            "killed": killed}
            return True

    def _ours(self, order_id: str | None, requester: Requester) -> bool:
        """Whether the request is for the armed order and comes from the armed run (called with the lock held)."""
        if order_id != self.order_id or self.run is None:
            return False
        if self.run.by_tree and self.run.leader is None:  # the harness names it right after the start
            self._lock.wait_for(lambda: self.run is None or self.run.leader is not None, LEADER_WAIT)
            if self.run is None:
                return False
        return self.run.holds(requester.pids)


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
