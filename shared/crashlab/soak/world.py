"""The soak's world and the faults it suffers: killed, down for a while, or up but failing for a while.

``--world-faults`` names them, comma-separated, each firing once at a random moment of the soak:

- ``world-kill``: SIGKILL the world's server mid-request, restart it at once on its own state;
- ``outage:SECONDS``: stop it, leave it down that long (every connection refused), restart it on its state;
- ``flaky:SECONDS``: leave it up, but for that long every service request is answered 503 and every model
  request 529 ("overloaded"), with nothing done -- the transient 5xx a durable agent must retry through.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from crashlab.world.audit import Audit
from crashlab.plumbing.processes import kill_group
from crashlab.world import World, WorldError

WORLD_FAULTS = ("world-kill", "outage:SECONDS", "flaky:SECONDS")
_TIMED = ("outage", "flaky")  # the faults that last SECONDS
_FORMS = "world-kill, outage:SECONDS or flaky:SECONDS, comma-separated"


def parse_world_faults(text: str) -> list[tuple[str, float]]:
    """``"world-kill,outage:8,flaky:20"`` -> ``[("world-kill", 0), ("outage", 8.0), ("flaky", 20.0)]``;
    ValueError, saying what is wrong in one line, for anything else."""
    faults = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, colon, arg = item.partition(":")
        if name == "world-kill" and not colon:
            faults.append(("world-kill", 0.0))
        elif name == "world-kill":
            raise ValueError(f"world-kill takes no seconds, got {item!r}: use world-kill, or outage:SECONDS for a "
                             "world that stays down")
        elif name in _TIMED:
            try:
                seconds = float(arg)
            except ValueError:
                seconds = float("nan")
            if not 0 < seconds < 3600:  # (also false for nan)
                raise ValueError(f"{name}:SECONDS needs a number of seconds above 0 and below 3600, got {item!r}")
            faults.append((name, seconds))
        else:
            raise ValueError(f"unknown world fault {item!r}: use {_FORMS}")
    if not faults:
        raise ValueError(f"no world faults given: use {_FORMS}")
    return faults


def fault_label(kind: str, seconds: float) -> str:
    return kind if kind == "world-kill" else f"{kind}:{seconds:g}"


class SoakWorld:
    """The soak's one world. A fault kills or stops it and restarts it on its own state (``fresh=False``), on
    the same port when it can, so agents started before keep a valid address; or makes it flaky for a while.
    While it is down, ``up`` is clear and everyone who needs it waits.

    ``generation`` counts the starts and ends of faults: it is odd while a fault is under way, so a resume
    round can tell whether it met one (:meth:`calm_since`), and such a round does not count against an order.
    :meth:`troubled_seconds` adds up the time faults lasted, so that an agent's timeout can leave it out."""

    def __init__(self, folder: Path, key_lease: float | None):
        self.folder, self.key_lease = folder, key_lease
        self.world = World.start(folder, key_lease=key_lease)
        self.up = threading.Event()
        self.up.set()
        self.generation = 0
        self.kills = 0
        self.outages: list[float] = []
        self.flaky: list[float] = []
        self.flaky_refused = 0  # requests the world answered with a 5xx while flaky
        self._fault_lock = threading.Lock()
        self.closed = threading.Event()
        self._troubled = 0.0  # seconds of faults that have ended
        self._fault_began: float | None = None  # when the fault under way began

    def troubled_seconds(self) -> float:
        """Seconds the world has spent killed, down or flaky so far, the fault under way included."""
        began = self._fault_began
        return self._troubled + (time.monotonic() - began if began is not None else 0.0)

    def env(self) -> dict:
        self.up.wait()
        return self.world.env()

    def calm_since(self, generation: int) -> bool:
        """No fault was under way when ``generation`` was read, and none has started since."""
        return generation % 2 == 0 and self.generation == generation

    def _when_up(self, ask, failed: str, attempts: int = 20):
        """``ask(world)`` once the world is up, again if it went down between the wait and the request."""
        for _ in range(attempts):
            self.up.wait()
            if self.closed.is_set():
                raise WorldError("the soak was stopped")
            try:
                return ask(self.world)
            except WorldError:
                time.sleep(0.2)
        raise WorldError(failed)

    def fail_permanently(self, order_id: str, step: str) -> None:
        """The world's :meth:`~crashlab.world.World.fail_permanently` (kept in its control ledger, so a restart
        keeps it)."""
        self._when_up(lambda world: world.fail_permanently(order_id, step),
                      f"the world did not take the failure of {order_id}")

    def audit(self, order_id: str, attempts: int = 20) -> Audit:
        return self._when_up(lambda world: world.audit(order_id), f"the world did not answer an audit of {order_id}",
                             attempts)

    def fault(self, kind: str, seconds: float) -> None:
        with self._fault_lock:  # one fault at a time: a fault due during another waits for it to end
            if self.closed.is_set():
                return
            self.generation += 1
            self._fault_began = time.monotonic()
            try:
                if kind == "flaky":
                    self._flaky(seconds)
                else:
                    self._down(kind, seconds)
            finally:
                self._troubled += time.monotonic() - self._fault_began
                self._fault_began = None
                self.generation += 1
                self.up.set()

    def _flaky(self, seconds: float) -> None:
        self.world.flaky(seconds)
        self.flaky.append(seconds)
        self.closed.wait(seconds)
        try:
            if self.closed.is_set():
                self.world.flaky(0)
            self.flaky_refused = self.world.flaky_state()["refused"]
        except WorldError:
            pass  # the soak is ending and its world with it

    def _down(self, kind: str, seconds: float) -> None:
        self.up.clear()
        world = self.world
        if kind == "world-kill":
            kill_group(world.pid)  # SIGKILL, no cleanup, no flush: its requests die mid-flight
            self.kills += 1
        world.stop()  # reaps the killed server, or stops it (SIGTERM) for an outage
        if kind == "outage":
            self.outages.append(seconds)
            self.closed.wait(seconds)
        if not self.closed.is_set():  # (a soak that ends, by Ctrl-C say, restarts nothing)
            self.world = self._restart(world.port)

    def _restart(self, port: int) -> World:
        for attempt in range(10):  # the old port can take a moment to be free again
            try:
                return World.start(self.folder, fresh=False, port=port if attempt < 9 else 0,
                                   key_lease=self.key_lease)
            except WorldError:
                time.sleep(0.3)
        return World.start(self.folder, fresh=False, key_lease=self.key_lease)

    def abort(self) -> None:
        """Stop waiting for the world: the soak is ending (an error, Ctrl-C)."""
        self.closed.set()
        self.up.set()

    def stop(self) -> None:
        self.closed.set()
        with self._fault_lock:  # a fault under way ends at once, restarting nothing
            self.up.set()
            self.world.stop()


__all__ = ["SoakWorld", "parse_world_faults", "fault_label", "WORLD_FAULTS"]
