"""The audit: what the outside world saw for one order, read straight from the world's ledgers.

The audit never asks the agent anything. It counts effects per kind (a duplicate is any effect of
a kind beyond the first), model calls, and repeated model calls (a request whose message list
equals an earlier one: the model was asked again for an answer it had already given).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.order import EFFECT_KIND, TOOL_ORDER
from crashlab.world import ledger
from crashlab.world.ledger import LedgerError

KINDS = tuple(EFFECT_KIND[tool] for tool in TOOL_ORDER)  # charge, reservation, confirmation


@dataclass
class Event:
    """One thing the world saw, for timelines: a model call or an effect."""

    at: float
    pid: int | None
    what: str  # 'model' or an effect kind
    label: str
    repeat: bool = False


@dataclass
class Audit:
    order_id: str
    effects: dict[str, list[dict]] = field(default_factory=dict)
    model_calls: int = 0
    repeated_model_calls: int = 0
    rejected_model_calls: int = 0
    final_answer_served: bool = False
    events: list[Event] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {kind: len(self.effects.get(kind, [])) for kind in KINDS}

    @property
    def duplicates(self) -> int:
        return sum(max(n - 1, 0) for n in self.counts.values())

    @property
    def duplicated(self) -> list[str]:
        """Effect kinds that happened more than once, e.g. ``['confirmation']``."""
        return [kind for kind, n in self.counts.items() if n > 1]

    @property
    def missing(self) -> list[str]:
        return [kind for kind, n in self.counts.items() if n == 0]

    @property
    def finished(self) -> bool:
        """Every effect happened and the model gave its final answer for this order."""
        return not self.missing and self.final_answer_served

    def duplicate_findings(self) -> list[str]:
        """One finding per duplicated kind, e.g. ``'2 confirmations (1 duplicate)'``."""
        return [f"{n} {kind}s ({n - 1} duplicate{'s' if n > 2 else ''})" for kind, n in self.counts.items() if n > 1]

    def describe_problems(self) -> list[str]:
        """Plain-language findings, e.g. ``'2 confirmations (1 duplicate)'``."""
        problems = self.duplicate_findings()
        if self.repeated_model_calls:
            problems.append(f"{self.repeated_model_calls} repeated model call(s)")
        if not self.finished:
            problems.append("not finished" + (f" (no {', no '.join(self.missing)})" if self.missing else
                                              " (the model never gave its final answer)"))
        return problems

    def as_dict(self) -> dict:
        return {"order_id": self.order_id, "effects": self.counts, "duplicates": self.duplicates,
                "model_calls": self.model_calls, "repeated_model_calls": self.repeated_model_calls,
                "rejected_model_calls": self.rejected_model_calls, "finished": self.finished}

    def as_json(self) -> dict:
        """Everything, as plain JSON: what the world's admin API sends to the harness."""
        return {"order_id": self.order_id, "effects": self.effects, "model_calls": self.model_calls,
                "repeated_model_calls": self.repeated_model_calls, "rejected_model_calls": self.rejected_model_calls,
                "final_answer_served": self.final_answer_served,
                "events": [[e.at, e.pid, e.what, e.label, e.repeat] for e in self.events]}

    @classmethod
    def from_json(cls, data: dict) -> "Audit":
        return cls(data["order_id"], {k: list(v) for k, v in data["effects"].items()}, int(data["model_calls"]),
                   int(data["repeated_model_calls"]), int(data["rejected_model_calls"]),
                   bool(data["final_answer_served"]), [Event(*e) for e in data["events"]])

    def __str__(self) -> str:
        effects = ", ".join(f"{kind} x{n}" for kind, n in self.counts.items())
        verdict = "; ".join(self.describe_problems()) or "clean"
        return (f"audit of {self.order_id}: {effects}; model calls {self.model_calls} "
                f"(repeated {self.repeated_model_calls}); finished {self.finished} -- {verdict}")

    __repr__ = __str__


def _read(path: Path, query: str, args: tuple) -> list[sqlite3.Row]:
    conn = ledger.connect(path, readonly=True)
    try:
        return conn.execute(query, args).fetchall()
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"ledger {path} is corrupt or not a world ledger ({exc})") from None
    finally:
        conn.close()


def audit(ledger_dir: str | Path, order_id: str) -> Audit:
    """Read every ledger in ``ledger_dir`` and report what happened to ``order_id``."""
    ledger_dir = Path(ledger_dir)
    result = Audit(order_id, effects={kind: [] for kind in KINDS})
    for name in ledger.SERVICE_LEDGERS.values():
        for row in _read(ledger_dir / name, "SELECT * FROM effects WHERE order_id = ? ORDER BY seq", (order_id,)):
            effect = dict(row)
            effect["params"] = json.loads(effect["params"])
            result.effects.setdefault(row["kind"], []).append(effect)
            n = len(result.effects[row["kind"]])
            result.events.append(Event(row["at"], row["pid"], row["kind"], f"{row['kind']} #{n}", repeat=n > 1))
    calls = _read(ledger_dir / ledger.MODEL_LEDGER, "SELECT * FROM calls WHERE order_id = ? OR order_id IS NULL"
                  " ORDER BY seq", (order_id,))
    for row in calls:
        if row["status"] != 200:
            result.rejected_model_calls += row["order_id"] == order_id or row["order_id"] is None
            continue
        result.model_calls += 1
        repeat = row["repeat_of"] is not None
        result.repeated_model_calls += repeat
        result.final_answer_served |= row["stop_reason"] == "end_turn"
        label = f"model #{result.model_calls}" + (f" (repeat of #{_ordinal(calls, row['repeat_of'])})" if repeat else "")
        result.events.append(Event(row["at"], row["pid"], "model", label, repeat=repeat))
    result.events.sort(key=lambda e: e.at)
    return result


def _ordinal(calls: list[sqlite3.Row], seq: int) -> int:
    """The position of call ``seq`` among the successful calls of this order."""
    ok = [row["seq"] for row in calls if row["status"] == 200]
    return ok.index(seq) + 1 if seq in ok else seq
