"""The audit: what the outside world saw for one order, read straight from the world's ledgers.

The audit never asks the agent anything. It counts effects per kind (a duplicate is any effect of
a kind beyond the first), model calls, and repeated model calls (a request whose message list
equals an earlier one: the model was asked again for an answer it had already given).

For an order that was undone, it also reports the order's *net* state -- charged minus refunded, reserved
minus released, confirmations and cancellations -- and a verdict (:data:`VERDICTS`): ``completed``,
``cleanly undone`` or ``inconsistent`` (money taken and no goods, goods held and no money, a refund without
a charge, a double refund, ...), or ``not started``. An order with no undo effects is reported as it always was.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.order import EFFECT_KIND, TOOL_ORDER, UNDO_TOOLS, order_details
from crashlab.world import ledger
from crashlab.world.ledger import LedgerError

KINDS = tuple(EFFECT_KIND[tool] for tool in TOOL_ORDER)  # charge, reservation, confirmation
UNDO_KINDS = tuple(EFFECT_KIND[tool] for tool in UNDO_TOOLS)  # refund, release, cancellation
VERDICTS = ("completed", "cleanly undone", "inconsistent", "not started")


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
    summaries: int = 0  # a backlog's summary calls (never its final answer), repeats not counted

    @property
    def counts(self) -> dict[str, int]:
        """Effects per kind: the three do kinds always, an undo kind (refund, release, cancellation) once it has one."""
        counts = {kind: len(self.effects.get(kind, [])) for kind in KINDS}
        counts.update({kind: len(self.effects[kind]) for kind in UNDO_KINDS if self.effects.get(kind)})
        return counts

    @property
    def compensated(self) -> bool:
        """True once the world has recorded an undo effect (a refund, a release or a cancellation) for the order."""
        return any(self.effects.get(kind) for kind in UNDO_KINDS)

    @property
    def net(self) -> dict:
        """The order's net state: dollars charged minus refunded, units reserved minus released, emails sent."""
        n = {kind: len(self.effects.get(kind, [])) for kind in KINDS + UNDO_KINDS}
        return {"charged": (self._cents("charge") - self._cents("refund")) / 100,
                "reserved": n["reservation"] - n["release"],
                "confirmations": n["confirmation"], "cancellations": n["cancellation"]}

    def _cents(self, kind: str) -> int:
        amounts = (effect.get("params", {}).get("amount") for effect in self.effects.get(kind, []))
        return sum(round(a * 100) for a in amounts if isinstance(a, (int, float)) and not isinstance(a, bool))

    @property
    def inconsistencies(self) -> list[str]:
        """What makes the order's net state wrong, in plain words; empty for a completed or cleanly undone order."""
        n = {kind: len(self.effects.get(kind, [])) for kind in KINDS + UNDO_KINDS}
        net = self.net
        price = order_details(self.order_id)[0]
        charged, held = round(net["charged"] * 100), net["reserved"]
        found = []
        if n["refund"] and not n["charge"]:
            found.append("a refund without a charge")
        elif n["refund"] > n["charge"]:
            found.append(f"{n['refund']} refunds for {n['charge']} charge{'s' * (n['charge'] > 1)} (a double refund)")
        elif charged < 0:
            found.append(f"refunded ${-charged / 100:.2f} more than was charged")
        if n["release"] and not n["reservation"]:
            found.append("a release without a reservation")
        elif n["release"] > n["reservation"]:
            found.append(f"{n['release']} releases for {n['reservation']} reservation{'s' * (n['reservation'] > 1)}")
        if charged > 0 and held <= 0:
            found.append(f"money taken and no goods: ${charged / 100:.2f} charged net, nothing reserved")
        elif held > 0 and charged <= 0:
            found.append(f"goods held and no money: {held} unit{'s' * (held > 1)} reserved, nothing charged net")
        elif charged > 0 and held > 0:  # an order that stands
            if charged != round(price * 100):
                found.append(f"${charged / 100:.2f} charged net for a ${price:.2f} order")
            if held > 1:
                found.append(f"{held} units reserved for a one-unit order")
            if n["cancellation"]:
                found.append("a cancellation sent for an order that still stands")
            elif not n["confirmation"]:
                found.append("charged and reserved, but no confirmation sent")
        elif any(n.values()) and not n["cancellation"]:
            found.append("nothing charged or reserved any more, but no cancellation sent")
        return found

    @property
    def verdict(self) -> str:
        """``completed``, ``cleanly undone``, ``inconsistent`` (see :attr:`inconsistencies`) or ``not started``
        (the world did nothing for the order), judged from the net state."""
        if not any(self.effects.get(kind) for kind in KINDS + UNDO_KINDS):
            return "not started"
        if self.inconsistencies:
            return "inconsistent"
        return "completed" if self.net["charged"] > 0 else "cleanly undone"

    @property
    def duplicates(self) -> int:
        return sum(max(n - 1, 0) for n in self.counts.values())

    @property
    def duplicated(self) -> list[str]:
        """Effect kinds that happened more than once, e.g. ``['confirmation']``."""
        return [kind for kind, n in self.counts.items() if n > 1]

    @property
    def missing(self) -> list[str]:
        """Do kinds with no effect (an undo kind is never missing)."""
        return [kind for kind in KINDS if not self.effects.get(kind)]

    @property
    def finished(self) -> bool:
        """Every effect happened and the model gave its final answer for this order."""
        return not self.missing and self.final_answer_served

    @property
    def turns(self) -> int:
        """The model calls a correct run makes: one per tool, then the final answer."""
        return len(TOOL_ORDER) + 1

    def unfinished(self) -> str:
        """Why the order is not finished, in words (``missing charge, reservation``), for a verdict."""
        return f"missing {', '.join(self.missing)}" if self.missing else "the model never gave its final answer"

    def duplicate_findings(self) -> list[str]:
        """One finding per duplicated kind, e.g. ``'2 confirmations (1 duplicate)'``."""
        return [f"{n} {kind}s ({n - 1} duplicate{'s' if n > 2 else ''})" for kind, n in self.counts.items() if n > 1]

    def describe_problems(self) -> list[str]:
        """Plain-language findings, e.g. ``'2 confirmations (1 duplicate)'``. For an order that was undone, what
        makes it inconsistent takes the place of "not finished"."""
        problems = self.duplicate_findings()
        if self.repeated_model_calls:
            problems.append(f"{self.repeated_model_calls} repeated model call(s)")
        if self.compensated:
            problems += self.inconsistencies
        elif not self.finished:
            problems.append("not finished" + (f" (no {', no '.join(self.missing)})" if self.missing else
                                              " (the model never gave its final answer)"))
        return problems

    def as_dict(self) -> dict:
        data = {"order_id": self.order_id, "effects": self.counts, "duplicates": self.duplicates,
                "model_calls": self.model_calls, "repeated_model_calls": self.repeated_model_calls,
                "rejected_model_calls": self.rejected_model_calls, "finished": self.finished}
        if self.compensated:  # only then: an order never undone is reported as it always was
            data.update(net=self.net, verdict=self.verdict, inconsistencies=self.inconsistencies)
        return data

    def as_json(self) -> dict:
        """Everything, as plain JSON: what the world's admin API sends to the harness."""
        return {"order_id": self.order_id, "effects": self.effects, "model_calls": self.model_calls,
                "repeated_model_calls": self.repeated_model_calls, "rejected_model_calls": self.rejected_model_calls,
                "final_answer_served": self.final_answer_served, "summaries": self.summaries,
                "events": [[e.at, e.pid, e.what, e.label, e.repeat] for e in self.events]}

    @classmethod
    def from_json(cls, data: dict) -> "Audit":
        return cls(data["order_id"], {k: list(v) for k, v in data["effects"].items()}, int(data["model_calls"]),
                   int(data["repeated_model_calls"]), int(data["rejected_model_calls"]),
                   bool(data["final_answer_served"]), [Event(*e) for e in data["events"]], int(data.get("summaries", 0)))

    def __str__(self) -> str:
        effects = ", ".join(f"{kind} x{n}" for kind, n in self.counts.items())
        verdict = "; ".join(self.describe_problems()) or "clean"
        if self.compensated:
            net, problems = self.net, "; ".join(self.describe_problems())
            charged = f"-${-net['charged']:.2f}" if net["charged"] < 0 else f"${net['charged']:.2f}"
            return (f"audit of {self.order_id}: {effects}; net: charged {charged}, reserved "
                    f"{net['reserved']}; model calls {self.model_calls} (repeated {self.repeated_model_calls}); "
                    f"{self.verdict}" + (f" -- {problems}" if problems else ""))
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


def audit(ledger_dir: str | Path, order_id: str, *, seen: bool = False) -> Audit:
    """Read every ledger in ``ledger_dir`` and report what happened to ``order_id``. ``seen``: LedgerError when
    the world has no record of the order at all (no effect, no model call for it), which is a mistyped id or
    another world's order far more often than an order that never started."""
    ledger_dir = Path(ledger_dir)
    result = Audit(order_id, effects={kind: [] for kind in KINDS})
    add_effects(result, read_effects(ledger_dir, "= ?", order_id))
    calls = read_calls(ledger_dir, order_id)
    add_calls(result, calls)
    if seen and not any(result.effects.values()) and not any(row["order_id"] == order_id for row in calls):
        raise LedgerError(f"the world in {ledger_dir.parent} has no record of order {order_id}: no effect and no "
                          "model call for it (check the order id, and --state)")
    result.events.sort(key=lambda e: e.at)
    return result


def read_effects(ledger_dir: Path, condition: str, value: str) -> list[dict]:
    """Every effect in the service ledgers whose order id meets ``condition`` with ``value`` (``= ?`` for one order,
    ``GLOB ?`` for a backlog's), its parameters decoded, in each ledger's order."""
    effects = []
    for name in ledger.SERVICE_LEDGERS.values():
        for row in _read(ledger_dir / name, f"SELECT * FROM effects WHERE order_id {condition} ORDER BY seq", (value,)):
            effects.append({**dict(row), "params": json.loads(row["params"])})
    return effects


def add_effects(result: Audit, effects: list[dict]) -> None:
    """File ``effects`` (of ``result``'s order) in ``result``, with an event each for its timeline."""
    for effect in effects:
        kind = effect["kind"]
        result.effects.setdefault(kind, []).append(effect)
        n = len(result.effects[kind])
        result.events.append(Event(effect["at"], effect["pid"], kind, f"{kind} #{n}", repeat=n > 1))


def read_calls(ledger_dir: Path, order_id: str) -> list[sqlite3.Row]:
    """The model calls filed under ``order_id`` (and those no order could be read from), oldest first: only the columns
    the audit reads, never the requests, which grow with the conversation (a long agent's weigh O(N^2) bytes)."""
    return _read(ledger_dir / ledger.MODEL_LEDGER, "SELECT seq, order_id, repeat_of, status, stop_reason, pid, at, summary"
                 " FROM calls WHERE order_id = ? OR order_id IS NULL ORDER BY seq", (order_id,))


def add_calls(result: Audit, calls: list[sqlite3.Row]) -> None:
    """Count ``calls`` (from :func:`read_calls` for ``result``'s order) in ``result``: a summary's ``end_turn`` (a
    backlog's compaction, see :mod:`crashlab.world.backlog_policy`) is never the final answer."""
    for row in calls:
        if row["status"] != 200:
            result.rejected_model_calls += 1
            continue
        result.model_calls += 1
        repeat = row["repeat_of"] is not None
        result.repeated_model_calls += repeat
        result.summaries += bool(row["summary"]) and not repeat
        result.final_answer_served |= row["stop_reason"] == "end_turn" and not row["summary"]
        label = f"model #{result.model_calls}" + (f" (repeat of #{_ordinal(calls, row['repeat_of'])})" if repeat else "")
        label += " (summary)" if row["summary"] else ""
        result.events.append(Event(row["at"], row["pid"], "model", label, repeat=repeat))


def _ordinal(calls: list[sqlite3.Row], seq: int) -> int:
    """The position of call ``seq`` among the successful calls of this order."""
    ok = [row["seq"] for row in calls if row["status"] == 200]
    return ok.index(seq) + 1 if seq in ok else seq
