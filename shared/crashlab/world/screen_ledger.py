"""The user's screen's ledger (``screen.db``): what it was asked to show and withdraw, in arrival order, and the
streamed replies' deliveries; what the screen shows after its rows (:func:`replay`) and where a reader stands
(:func:`cursor`). The service itself, and why it is dumb on purpose, are in :mod:`crashlab.world.screen`.

The screen's rows are written without fsync: the course kills agents, never the world, and a SIGKILL leaves the page
cache to the kernel; a show costs a relay a fraction of a synced write (it is paid per chunk).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from crashlab.order import is_order_id
from crashlab.world import ledger

# The identity a show may claim, and what each must be.
IDENTITY: dict[str, str] = {"turn": "an integer >= 1", "chunk": "an integer >= 0", "attempt": "a string",
                            "stream": "a string", "offset": "an integer >= 0"}


def _fits(name: str, value: Any) -> bool:
    if value is None:
        return True
    if name in ("attempt", "stream"):
        return isinstance(value, str) and bool(value)
    return type(value) is int and value >= (1 if name == "turn" else 0)


def check_show(body: Any, kind: str) -> str | None:
    """What is wrong with a show's (``kind="show"``) or a retraction's body, in one line; None if nothing."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    if not is_order_id(body.get("order_id")):
        return f"order_id must be an order id such as ORD-8842, got {body.get('order_id')!r}"
    if kind == "show" and not isinstance(body.get("text"), str):
        return f"text must be a string (what the user sees), got {body.get('text')!r}"
    if kind == "retract" and body.get("turn") is None:
        return "a retraction names the turn whose text it withdraws (turn, an integer >= 1)"
    for name, what in IDENTITY.items():
        if not _fits(name, body.get(name)):
            return f"{name} must be {what}, got {body.get(name)!r}"
    return None


def replay(rows: list[dict]) -> list[dict]:
    """What the screen shows after ``rows`` (its ledger's, in order): each show appended, each retraction of a turn
    taking away what that turn shows."""
    visible: list[dict] = []
    for row in rows:
        if row["kind"] == "retract":
            visible = [v for v in visible if v["turn"] != row["turn"]]
        else:
            visible.append(row)
    return visible


def cursor(rows: list[dict], stream: str | None = None) -> dict:
    """Where the user stands: per turn, the highest chunk still shown and the attempt it came from; and one past
    the highest offset of ``stream`` shown (0 if none), where a resumable reader of that stream goes on."""
    turns: dict[str, int] = {}
    attempts: dict[str, str] = {}
    for row in replay(rows):
        if row["turn"] is None:
            continue
        turn = str(row["turn"])
        if row["chunk"] is not None:
            turns[turn] = max(turns.get(turn, -1), row["chunk"])
        if row["attempt"] is not None:
            attempts[turn] = row["attempt"]
    offsets = [r["offset"] for r in rows if r["kind"] == "show" and stream is not None and r["stream"] == stream
               and r["offset"] is not None]
    return {"turns": turns, "attempts": attempts, "next_offset": max(offsets) + 1 if offsets else 0}


class ScreenLedger:
    """The screen's ledger in a world's ledger folder: the rows shown and retracted, and the streamed replies'
    deliveries."""

    def __init__(self, ledger_dir: Path, *, readonly: bool = False):
        self.path = Path(ledger_dir) / ledger.SCREEN_LEDGER
        self.readonly = readonly

    def _connect(self) -> sqlite3.Connection:
        conn = ledger.connect(self.path, readonly=self.readonly)
        if not self.readonly:
            conn.execute("PRAGMA synchronous=OFF")
        return conn

    def _run(self, query: str, args: tuple = ()) -> list[dict]:
        conn = self._connect()
        try:
            cur = conn.execute(query, args)
            return [dict(row) for row in cur.fetchall()] if cur.description else [{"seq": cur.lastrowid}]
        except sqlite3.DatabaseError as exc:
            raise ledger.LedgerError(f"ledger {self.path} is corrupt or not a screen ledger ({exc})") from None
        finally:
            conn.close()

    def record(self, kind: str, body: dict, pid: int | None) -> int:
        """Record a show or a retraction (its body checked by :func:`check_show`); its sequence number."""
        fields = ("order_id", "text", *IDENTITY)
        values = tuple(body.get(name) if kind == "show" or name in ("order_id", "turn") else None for name in fields)
        row = self._run(f"INSERT INTO shown(kind, {', '.join(fields)}, pid, at) VALUES (?{', ?' * len(fields)}, ?, ?)",
                        (kind, *values, pid, time.time()))
        return int(row[0]["seq"])

    def rows(self, order_id: str, since: int = 0) -> list[dict]:
        """The order's rows after sequence number ``since``, in order."""
        return self._run("SELECT * FROM shown WHERE order_id = ? AND seq > ? ORDER BY seq", (order_id, since))

    def last_seq(self) -> int:
        return int(self._run("SELECT coalesce(max(seq), 0) AS seq FROM shown")[0]["seq"])

    def deliver(self, message_id: str, order_id: str | None, chunks: list[str], deltas: int) -> None:
        """A streamed reply begins: its text deltas, and how many deltas it has in all."""
        self._run("INSERT OR REPLACE INTO deliveries(message_id, order_id, chunks, deltas, at) VALUES (?, ?, ?, ?, ?)",
                  (message_id, order_id, json.dumps(chunks), deltas, time.time()))

    def progress(self, message_id: str, sent: int, *, complete: bool = False, cut: str | None = None) -> None:
        self._run("UPDATE deliveries SET sent = ?, complete = ?, cut = ? WHERE message_id = ?",
                  (sent, int(complete), cut, message_id))

    def deliveries(self, order_id: str) -> list[dict]:
        return self._run("SELECT * FROM deliveries WHERE order_id = ? ORDER BY at", (order_id,))


__all__ = ["IDENTITY", "ScreenLedger", "check_show", "cursor", "replay"]
