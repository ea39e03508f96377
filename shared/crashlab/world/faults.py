"""The world's faults, kept in its control ledger so that they outlive an agent's crash and a world's restart.

- counted faults (``lost_ack:TOOL``, ``latency:TOOL``, ``refuse:TOOL``, ``malformed_reply``, ``parallel_tool_use``
  -- not a fault but a way the model may answer, armed the same way): each fires as many
  times as it was armed for, for one order or for any. The harness arms them for the order under test, so that
  requests for another order (a decoy's, sent to use them up where they cost nothing) leave them armed; a
  lesson that spreads one fault over several orders arms it for any;
- *flaky*: until a wall-clock time, every request fails with a retryable status and does nothing;
- permanent failures: every call of one tool for one order fails for good (a declined card, an item out of
  stock, a rejected address), until cleared;
- held orders (:class:`Gate`): once a ``hold:TOOL`` fault has fired, the order's later requests wait.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from crashlab.world import ledger

HOLD_MAX_S = 60.0  # seconds a held request waits at most: a gate nobody opens cannot stall an order for good


class Faults:
    """Faults the world injects on request, counted down in the control ledger so they survive
    the agent's crash and fire exactly as many times as asked."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / ledger.CONTROL_LEDGER
        self.lock = threading.Lock()

    def _connection(self):
        """A connection to the control ledger, closed when the block ends (each write commits on its own)."""
        return contextlib.closing(ledger.connect(self.path))

    def set(self, name: str, remaining: int = 1, arg: str | None = None, order_id: str | None = None) -> None:
        """Arm fault ``name`` for ``order_id`` (None: any order). One order's fault is kept as ``NAME@ORDER``, so
        the control ledger of a world restarted with ``--keep`` needs no new column."""
        with self.lock, self._connection() as conn:
            conn.execute("INSERT OR REPLACE INTO faults(name, remaining, arg) VALUES (?, ?, ?)",
                         (name if order_id is None else f"{name}@{order_id}", remaining, arg))

    def take(self, name: str, order_id: str | None) -> str | None:
        """Consume one firing of fault ``name`` for a request for ``order_id`` -- the order's own first, then one
        armed for any order; return its argument ('' if none), or None if unarmed."""
        keys = [name] if order_id is None else [f"{name}@{order_id}", name]
        with self.lock, self._connection() as conn:
            for key in keys:
                row = conn.execute("SELECT remaining, arg FROM faults WHERE name = ?", (key,)).fetchone()
                if row is not None and row["remaining"] > 0:
                    conn.execute("UPDATE faults SET remaining = remaining - 1 WHERE name = ?", (key,))
                    return row["arg"] or ""
            return None

    def all(self) -> list[dict]:
        with self._connection() as conn:
            return [dict(r) for r in conn.execute("SELECT * FROM faults ORDER BY name")]

    # A flaky world: for a time, every request fails with a retryable status and does nothing.
    def set_flaky(self, seconds: float, status: int, model_status: int | None) -> None:
        with self.lock, self._connection() as conn:
            conn.execute("INSERT INTO flaky(id, until, status, model_status) VALUES (1, ?, ?, ?) ON CONFLICT(id)"
                         " DO UPDATE SET until = excluded.until, status = excluded.status,"
                         " model_status = excluded.model_status", (time.time() + seconds, status, model_status))

    def flaky_status(self, model: bool) -> int | None:
        """The status to answer this request with, if the world is flaky now (counted); else None."""
        with self.lock, self._connection() as conn:
            row = conn.execute("SELECT until, status, model_status FROM flaky WHERE id = 1").fetchone()
            status = None if row is None or row["until"] <= time.time() else \
                row["model_status"] if model else row["status"]
            if status is not None:
                conn.execute("UPDATE flaky SET refused = refused + 1 WHERE id = 1")
            return status

    def flaky(self) -> dict:
        with self._connection() as conn:
            row = conn.execute("SELECT until, refused FROM flaky WHERE id = 1").fetchone()
            return {"seconds_left": max(0.0, row["until"] - time.time()) if row else 0.0,
                    "refused": row["refused"] if row else 0}  # since the world's ledgers were made

    # Permanent failures: every call of a tool for an order fails the same way, until cleared.
    def set_failure(self, order_id: str, tool: str, reason: str | None) -> None:
        """Make ``tool`` fail for good for ``order_id`` with ``reason``; ``reason=None`` clears it (``tool=None``:
        every tool of the order)."""
        with self.lock, self._connection() as conn:
            if reason is not None:
                conn.execute("INSERT OR REPLACE INTO failures(order_id, tool, reason) VALUES (?, ?, ?)",
                             (order_id, tool, reason))
            elif tool is None:
                conn.execute("DELETE FROM failures WHERE order_id = ?", (order_id,))
            else:
                conn.execute("DELETE FROM failures WHERE order_id = ? AND tool = ?", (order_id, tool))

    def failure(self, order_id: str, tool: str) -> str | None:
        """The reason ``tool`` fails for good for ``order_id``, or None."""
        with self._connection() as conn:
            row = conn.execute("SELECT reason FROM failures WHERE order_id = ? AND tool = ?",
                               (order_id, tool)).fetchone()
            return row["reason"] if row else None

    def failures(self) -> list[dict]:
        with self._connection() as conn:
            return [dict(r) for r in conn.execute("SELECT * FROM failures ORDER BY order_id, tool")]


class Gate:
    """The orders whose requests wait. When a ``hold:TOOL`` fault fires -- TOOL's effect for the order committed,
    its reply about to leave -- the order's later requests, the model's and the tools', wait here until the gate
    opens (:meth:`open`, through the admin API). A soak directs a fault at "right after the charge" this way: it
    sees the effect in the ledger whenever it gets to look, begins the fault (the world stopped, frozen or flaky),
    then opens the gate, so the agent's next step meets the fault however slow the machine, instead of the agent
    finishing the order before the soak has looked. Kept in memory: a world restarted (an outage) holds nothing."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held: set[str] = set()
        self.waiting = 0  # requests waiting now

    def close(self, order_id: str) -> None:
        with self._changed:
            self._held.add(order_id)

    def wait(self, order_id: str | None) -> bool:
        """Wait while ``order_id`` is held (at most :data:`HOLD_MAX_S`); True if this request was held."""
        with self._changed:
            if order_id not in self._held:
                return False
            self.waiting += 1
            try:
                self._changed.wait_for(lambda: order_id not in self._held, HOLD_MAX_S)
            finally:
                self.waiting -= 1
            return True

    def open(self, order_id: str | None = None) -> None:
        """Let ``order_id``'s requests go on (None: every order's)."""
        with self._changed:
            if order_id is None:
                self._held.clear()
            else:
                self._held.discard(order_id)
            self._changed.notify_all()
