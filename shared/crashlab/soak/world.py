"""The soak's world and the faults it suffers: killed, down for a while, or up but failing for a while.

``--world-faults`` names them, comma-separated, each firing once at a random moment of the soak:

- ``world-kill``: SIGKILL the world's server mid-request, restart it at once on its own state;
- ``outage:SECONDS``: stop it, leave it down that long (every connection refused), restart it on its state;
- ``flaky:SECONDS``: leave it up, but for that long every service request is answered 503 and every model
  request 529 ("overloaded"), with nothing done -- the transient 5xx a durable agent must retry through;
- ``pause:SECONDS``: freeze it (SIGSTOP) that long, then let it go on (SIGCONT): requests in flight and new ones
  hang instead of being refused, as behind a stalled server or network. An engine that gives up on an attempt after
  a timeout starts another while the first still waits, and both are answered once the world goes on: with
  ``--kills none``, the model calls beyond a clean run's are what those zombie attempts cost. A
  directed pause freezes the world once the order's next request is waiting, so that request is the one in flight.

Each may be *directed* with ``@TOOL`` (``outage:200@charge_card``): it fires as soon as the world has committed
TOOL's effect for the order it falls to, instead of at a random moment -- the outage that starts right after the
charge, with the rest of the order, or its undo (``@refund_charge``), still to do. The world holds the order's next
request from that effect on until the fault has begun (``hold:TOOL``), so it is the next step that meets the fault
however late the soak looks.

A world that dies on its own (killed by someone else) is restarted on its state the next time the soak needs it,
and counted; an audit the world cannot answer leaves that order unaudited, said in the summary.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import NamedTuple

from crashlab.order import ALL_TOOLS, EFFECT_KIND
from crashlab.plumbing.processes import frozen, kill_group
from crashlab.world import World, WorldError
from crashlab.world.audit import Audit
from crashlab.world.faults import HOLD_MAX_S

WORLD_FAULTS = ("world-kill", "outage:SECONDS", "flaky:SECONDS", "pause:SECONDS")
_TIMED = ("outage", "flaky", "pause")  # the faults that last SECONDS
_FORMS = "world-kill, outage:SECONDS, flaky:SECONDS or pause:SECONDS, each with @TOOL or not, comma-separated"


class WorldFault(NamedTuple):
    kind: str  # world-kill, outage, flaky or pause
    seconds: float = 0.0
    after: str | None = None  # a tool: fire once the order's ledger holds its effect (None: at a random moment)


def parse_world_faults(text: str) -> list[WorldFault]:
    """``"world-kill,outage:8,flaky:20@charge_card"`` -> ``[WorldFault("world-kill", 0), WorldFault("outage", 8.0),
    WorldFault("flaky", 20.0, "charge_card")]``; ValueError, saying what is wrong in one line, for anything else."""
    faults = []
    for whole in (part.strip() for part in text.split(",")):
        if not whole:
            continue
        item, at, after = whole.partition("@")
        if at and after not in ALL_TOOLS:
            raise ValueError(f"{whole!r}: @ names the tool after whose effect the fault fires, one of "
                             f"{', '.join(ALL_TOOLS)}")
        faults.append(_parse_one(item, whole)._replace(after=after or None))
    if not faults:
        raise ValueError(f"no world faults given: use {_FORMS}")
    return faults


def _parse_one(item: str, whole: str) -> WorldFault:
    name, colon, arg = item.partition(":")
    if name == "world-kill" and not colon:
        return WorldFault("world-kill", 0.0)
    if name == "world-kill":
        raise ValueError(f"world-kill takes no seconds, got {whole!r}: use world-kill, or outage:SECONDS for a "
                         "world that stays down")
    if name in _TIMED:
        try:
            seconds = float(arg)
        except ValueError:
            seconds = float("nan")
        if not 0 < seconds < 3600:  # (also false for nan)
            raise ValueError(f"{name}:SECONDS needs a number of seconds above 0 and below 3600, got {whole!r}")
        return WorldFault(name, seconds)
    raise ValueError(f"unknown world fault {whole!r}: use {_FORMS}")


def fault_label(kind: str, seconds: float = 0.0, after: str | None = None) -> str:
    return (kind if kind == "world-kill" else f"{kind}:{seconds:g}") + (f"@{after}" if after else "")


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
        self.pauses: list[float] = []
        self.flaky_refused = 0  # requests the world answered with a 5xx while flaky
        self._fault_lock = threading.Lock()
        self.closed = threading.Event()
        self._troubled = 0.0  # seconds of faults that have ended
        self._fault_began: float | None = None  # when the fault under way began
        self.deaths = 0  # times the world was found dead, not by a fault of the soak's, and restarted
        self.unaudited: list[str] = []  # orders whose audit the world never answered
        self.unfired: list[str] = []  # directed faults whose order ended without the tool's effect
        self.fault_log: list[dict] = []  # each fault fired: its label, and when it began and ended (wall clock)

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
        """``ask(world)`` once the world is up, again if it went down between the wait and the request; a world
        that died on its own meanwhile is restarted on its state first."""
        for _ in range(attempts):
            self.up.wait()
            if self.closed.is_set():
                raise WorldError("the soak was stopped")
            try:
                return ask(self.world)
            except WorldError:
                self._revive()
                time.sleep(0.2)
        raise WorldError(failed)

    def _revive(self) -> None:
        """Restart the world on its own state if its server is gone and no fault of the soak's is under way."""
        with self._fault_lock:
            if self.closed.is_set() or not self.up.is_set() or self.world.running():
                return
            port = self.world.port
            self.world.stop()
            self.deaths += 1
            self.world = self._restart(port)

    def fail_permanently(self, order_id: str, step: str) -> None:
        """The world's :meth:`~crashlab.world.World.fail_permanently` (kept in its control ledger, so a restart
        keeps it)."""
        self._when_up(lambda world: world.fail_permanently(order_id, step),
                      f"the world did not take the failure of {order_id}")

    def audit(self, order_id: str, attempts: int = 20) -> Audit:
        return self._when_up(lambda world: world.audit(order_id), f"the world did not answer an audit of {order_id}",
                             attempts)

    def try_audit(self, order_id: str, attempts: int = 20) -> Audit | None:
        """The order's audit, or None (noted in :attr:`unaudited`) when the world does not answer one."""
        try:
            return self.audit(order_id, attempts)
        except WorldError:
            if not self.closed.is_set():
                self.unaudited.append(order_id)
            return None

    def hold(self, order_id: str, tool: str) -> None:
        """Once ``tool``'s effect for ``order_id`` is committed, the world holds the order's later requests until a
        fault begins (:meth:`fault` lets them go): a fault directed at that moment meets the order's next step."""
        self._when_up(lambda world: world.inject(f"hold:{tool}", order_id=order_id),
                      f"the world did not take the hold of {order_id}")

    def effect_seen(self, order_id: str, tool: str) -> bool:
        """Whether the world has committed ``tool``'s effect for the order (False while it cannot say)."""
        if not self.up.is_set():
            return False
        try:
            return bool(self.world.audit(order_id).counts.get(EFFECT_KIND[tool]))
        except WorldError:
            return False

    def fault(self, kind: str, seconds: float, after: str | None = None, held: str | None = None) -> None:
        """Fire one fault now (``after``, for a directed one, was waited for by the caller; ``held``, the order
        whose requests the world holds meanwhile (:meth:`hold`), goes on once the fault has begun)."""
        with self._fault_lock:  # one fault at a time: a fault due during another waits for it to end
            if self.closed.is_set():
                return
            self.generation += 1
            self._fault_began = time.monotonic()
            logged = {"fault": fault_label(kind, seconds, after), "began": time.time(), "ended": None}
            self.fault_log.append(logged)
            try:
                if kind == "flaky":
                    self._flaky(seconds, held)
                elif kind == "pause":
                    self._pause(seconds, held)
                else:
                    self._down(kind, seconds)  # a held request dies with the world, as the agent's next one would
            finally:
                logged["ended"] = time.time()
                self._troubled += time.monotonic() - self._fault_began
                self._fault_began = None
                self.generation += 1
                self.up.set()

    def _flaky(self, seconds: float, held: str | None) -> None:
        self.world.flaky(seconds)
        if held is not None:
            self.world.release_held(held)
        self.flaky.append(seconds)
        self.closed.wait(seconds)
        try:
            if self.closed.is_set():
                self.world.flaky(0)
            self.flaky_refused = self.world.flaky_state()["refused"]
        except WorldError:
            pass  # the soak is ending and its world with it

    def _pause(self, seconds: float, held: str | None) -> None:
        """Freeze the world's server (its whole process group) for ``seconds``; the soak waits for it as for an
        outage. A held order's request then goes on, as one in flight when the world froze."""
        if held is not None:
            self._await_held_request()
        self.up.clear()
        self.pauses.append(seconds)
        with frozen(self.world.pid, seconds):  # thawed on time even if this process is killed meanwhile
            self.closed.wait(seconds)
        if held is not None and not self.closed.is_set():
            try:
                self.world.release_held(held)
            except WorldError:
                pass  # the soak is ending and its world with it

    def _await_held_request(self, patience: float = HOLD_MAX_S / 2) -> None:
        """Wait (at most ``patience`` seconds) until the held order's next request waits at the world's gate, so
        the world freezes with that request in flight. The soak sees an effect in the ledger as soon as it is
        committed, which may be before the effect's reply has left: frozen then, the world would hold the reply
        instead, and the order's next request would arrive after the thaw, meeting no pause at all."""
        deadline = time.monotonic() + patience
        while not self.closed.is_set() and time.monotonic() < deadline:
            try:
                if self.world.held_requests() > 0:
                    return
            except WorldError:
                return  # the world is gone: the fault that follows finds it so
            self.closed.wait(0.05)

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
