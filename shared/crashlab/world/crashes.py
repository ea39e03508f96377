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
is killed; ``TOOL#N`` and ``turn#N`` count the run's requests for that tool, or for any tool, the same way. A
backlog's orders (``ORD-BL-034-017``) are the armed backlog's (``ORD-BL-034``): its model calls are filed under the
backlog, its tool calls under each order.

Only a request for the armed order, from one of the run's own processes, meets the point: a child the run forks
to send throwaway requests for another order (a decoy, to spend the point where it costs nothing) does not
reach it, and neither does a process outside the run. The requester is found from outside: the processes
holding the client end of the connection (/proc), each checked against the run's mark -- or, where root may not
read other users' /proc/PID/fd (a container without CAP_SYS_PTRACE), the user that made that end, for a run with a
crash user of its own. "Reached" is what the
world saw, so an agent cannot fake reaching a point, and it cannot tell a run that will be killed from one that
will not.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from crashlab.backlog import backlog_of
from crashlab.crash_points import CrashPoint, Moment, When
from crashlab.plumbing.processes import holders
from crashlab.world.runscope import RunScope

LEADER_WAIT = 10.0  # seconds a request may wait for the harness to name a run's first process (tree scopes)


class Requester:
    """The processes behind one request's connection, and the users that made its client end, looked up once
    (a /proc walk) and only if needed."""

    def __init__(self, client_port: int, server_port: int):
        self.ports = (client_port, server_port)
        self._pids: set[int] | None = None
        self._owners: set[int] = set()

    def _look(self) -> set[int]:
        if self._pids is None:
            sockets = client_sockets(*self.ports)
            self._owners = set(sockets.values())
            self._pids = holders({f"socket:[{inode}]" for inode in sockets}) if sockets else set()
        return self._pids

    @property
    def pids(self) -> set[int]:
        return self._look()

    @property
    def owners(self) -> set[int]:
        """The uids the kernel recorded as the client end's owners when it was made (no unprivileged process can
        change them, and reading them needs no privilege)."""
        self._look()
        return self._owners


class CrashPlan:
    """The one crash point armed in the world (a :class:`~crashlab.crash_points.CrashPoint`), for one order and one
    run, and what the world saw of it. The request handlers describe each instant at which a run may be killed as
    a :class:`~crashlab.crash_points.Moment` (:class:`CrashSite`); the point says whether it is met."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.point: CrashPoint | None = None
        self.order_id: str | None = None
        self.run: RunScope | None = None
        self.reached: dict | None = None
        self._calls: dict[str, int] = {}

    def arm(self, point: CrashPoint | None, order_id: str | None = None, run: RunScope | None = None) -> None:
        """Arm ``point`` for ``order_id`` and ``run`` (``None``: disarm)."""
        if point is not None and (order_id is None or run is None):
            raise ValueError("a crash point is armed for an order and a run")
        with self._lock:
            self.point, self.order_id, self.run = point, order_id, run
            self.reached, self._calls = None, {}
            self._lock.notify_all()

    def started(self, leader: int) -> None:
        """The harness started the run's first process (needed where only the process tree marks the run)."""
        with self._lock:
            if self.run is not None:
                self.run = self.run.led_by(leader)
                self._lock.notify_all()

    def state(self) -> dict:
        with self._lock:
            return {"point": None if self.point is None else str(self.point), "order_id": self.order_id,
                    "reached": self.reached}

    def site(self, target: str, order_id: str | None, requester: Requester) -> CrashSite:
        """Where a request for ``target`` (the model or a tool) may meet the point: numbered among the run's calls
        of ``target`` for its order when the armed point counts them (only then is the requester looked up)."""
        with self._lock:
            call = None
            if self.point is not None and self.point.counts(target) and self.reached is None \
                    and self._ours(order_id, requester):
                counted = self.point.target  # one point, one count: its target's requests (any tool's for turn#N)
                call = self._calls[counted] = self._calls.get(counted, 0) + 1
        return CrashSite(self, target, call, order_id, requester)

    def fire(self, moment: Moment, order_id: str | None, requester: Requester) -> bool:
        """Kill the run if this request, at ``moment``, meets the armed point. True when it fired (send no reply)."""
        with self._lock:
            run = self.run
            if self.point is None or not self.point.meets(moment) or self.reached is not None or run is None \
                    or not self._ours(order_id, requester):
                return False
            killed = run.kill()
            self.reached = {"point": str(self.point), "order_id": order_id, "at": time.time(),
                            "pids": sorted(requester.pids), "killed": killed}
            return True

    def due(self, moment: Moment, order_id: str | None, requester: Requester) -> bool:
        """Whether :meth:`fire` would kill the run at ``moment`` (nothing is killed): a stream asks first, so that
        it can wait, outside the plan's lock, until the user has seen what was sent before the kill."""
        with self._lock:
            return (self.point is not None and self.point.meets(moment) and self.reached is None
                    and self.run is not None and self._ours(order_id, requester))

    def _ours(self, order_id: str | None, requester: Requester) -> bool:
        """Whether the request is for the armed order -- or one of the armed backlog's orders -- and comes from the armed
        run (called with the lock held)."""
        if (order_id != self.order_id and backlog_of(order_id) != self.order_id) or self.run is None:
            return False
        if self.run.by_tree and self.run.leader is None:  # the harness names it right after the start
            self._lock.wait_for(lambda: self.run is None or self.run.leader is not None, LEADER_WAIT)
            if self.run is None:
                return False
        # Where no holder can be seen -- root without CAP_SYS_PTRACE (a container's default) cannot read another
        # user's /proc/PID/fd -- a run of a crash user of its own is told by the user that made the connection.
        return self.run.holds(requester.pids) or (not requester.pids and self.run.made(requester.owners))


class CrashSite:
    """One request's instants: ``fire("before")`` on its arrival, ``fire("after")`` once its effect or answer is
    committed; each kills the run if the armed point is met there. ``detail``: what else a kind of instant tells
    (a :class:`~crashlab.crash_points.Moment`'s further fields), passed on as it is."""

    def __init__(self, plan: CrashPlan, target: str, call: int | None, order_id: str | None, requester: Requester):
        self.plan, self.target, self.call, self.order_id, self.requester = plan, target, call, order_id, requester

    def fire(self, when: When, **detail: Any) -> bool:
        return self.plan.fire(Moment(when, self.target, self.call, **detail), self.order_id, self.requester)

    def due(self, when: When, **detail: Any) -> bool:
        """Whether :meth:`fire` with the same arguments would kill the run (see :meth:`CrashPlan.due`)."""
        return self.plan.due(Moment(when, self.target, self.call, **detail), self.order_id, self.requester)


def _client_ends(client_port: int, server_port: int) -> list[list[str]]:
    """The /proc/net/tcp rows (split into fields) of the client end of a loopback TCP connection."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            try:
                if (int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)) \
                        == (client_port, server_port):
                    rows.append(fields)
            except (IndexError, ValueError):
                continue
    return rows


def client_sockets(client_port: int, server_port: int) -> dict[str, int]:
    """The client end of a loopback TCP connection: each socket's inode and the uid that owns it (/proc/net/tcp)."""
    return {fields[9]: int(fields[7]) for fields in _client_ends(client_port, server_port) if len(fields) > 9}


def unread_bytes(client_port: int, server_port: int) -> int | None:
    """Bytes the client end of a loopback connection has received and its process not yet read (its receive
    queue in /proc/net/tcp); None when the connection is not found there (closed)."""
    for fields in _client_ends(client_port, server_port):
        try:
            return int(fields[4].split(":")[1], 16)
        except (IndexError, ValueError):
            continue
    return None

