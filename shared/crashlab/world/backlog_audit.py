"""The audit of a backlog (the long task, :mod:`crashlab.backlog`): what the outside world saw for every order of it,
read straight from the world's ledgers in one pass -- never from the agent.

Each order is audited as one order always is (:class:`crashlab.world.audit.Audit`: its effects per kind, its
duplicates); the backlog adds what a long task can leave behind:

- **lost** -- orders the world did nothing for (a run that died, or was terminated by its engine, before them);
- **stuck** -- orders with some effects and not all (charged and never confirmed), the missing kinds named in words;
- **complete** -- orders with every effect;
- the model calls, filed under the backlog's id: how many, how many repeated (asked again for an answer already
  given), how many were summaries (a compaction's), and whether the final answer was served -- a summary's
  ``end_turn`` never counts as one;
- **finished** -- every order complete and the final answer served.

:meth:`BacklogAudit.describe_problems` says what is wrong in the words of a single order's audit; a crash matrix judges
a backlog's row as it judges an order's (:func:`crashlab.harness.verdicts.judge`), its :attr:`BacklogAudit.turns`
being the backlog's tool turns, its summaries and the final answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from crashlab.backlog import backlog_orders, backlog_turns, is_backlog
from crashlab.world.audit import KINDS, Audit, Event, add_calls, add_effects, audit, read_calls, read_effects
from crashlab.world.ledger import LedgerError

DONE_WORDS = {"charge": "charged", "reservation": "reserved", "confirmation": "confirmed"}


@dataclass
class BacklogAudit:
    """A backlog's audit: ``orders`` (each order's :class:`~crashlab.world.audit.Audit`, effects only) and ``calls``
    (the model calls filed under the backlog's id, as an :class:`~crashlab.world.audit.Audit` without effects)."""

    order_id: str  # the backlog's id, as the harness names what it audits
    orders: dict[str, Audit] = field(default_factory=dict)
    calls: Audit | None = None

    def __post_init__(self) -> None:
        if self.calls is None:
            self.calls = Audit(self.order_id)

    @property
    def _calls(self) -> Audit:
        assert self.calls is not None  # set in __post_init__
        return self.calls

    # --- the orders -------------------------------------------------------------------------------------------
    @property
    def lost(self) -> list[str]:
        """Orders the world did nothing for."""
        return [order for order, each in self.orders.items() if not any(each.counts.values())]

    @property
    def stuck(self) -> dict[str, list[str]]:
        """Orders with some effects and not all: order -> the kinds it is missing."""
        return {order: each.missing for order, each in self.orders.items()
                if each.missing and any(each.counts.values())}

    @property
    def complete(self) -> list[str]:
        """Orders with every effect (duplicates or not)."""
        return [order for order, each in self.orders.items() if not each.missing]

    def stuck_words(self) -> list[str]:
        """Each stuck order in words: ``ORD-BL-034-017: charged and reserved, no confirmation``."""
        words = []
        for order, missing in self.stuck.items():
            done = [DONE_WORDS[kind] for kind in KINDS if kind not in missing]
            did = done[0] if len(done) == 1 else ", ".join(done[:-1]) + " and " + done[-1]
            words.append(f"{order}: {did}, no {', no '.join(missing)}")
        return words

    def lost_words(self) -> str | None:
        """The lost orders in words (``3 orders never started (ORD-BL-034-032, ...)``), or None."""
        lost = self.lost
        if not lost:
            return None
        shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
        return f"{len(lost)} order{'s' * (len(lost) > 1)} never started ({shown})"

    # --- what the harness reads of any audit ------------------------------------------------------------------
    @property
    def counts(self) -> dict[str, int]:
        """Effects per kind, over every order (a duplicate is counted within its order: see :attr:`duplicates`)."""
        totals: dict[str, int] = {}
        for each in self.orders.values():
            for kind, n in each.counts.items():
                totals[kind] = totals.get(kind, 0) + n
        return totals

    @property
    def effects(self) -> dict[str, list[dict]]:
        """Every effect of the backlog, per kind."""
        found: dict[str, list[dict]] = {kind: [] for kind in KINDS}
        for each in self.orders.values():
            for kind, effects in each.effects.items():
                found.setdefault(kind, []).extend(effects)
        return found

    @property
    def duplicates(self) -> int:
        return sum(each.duplicates for each in self.orders.values())

    def duplicate_findings(self) -> list[str]:
        """One finding per order and duplicated kind: ``ORD-BL-034-005: 2 charges (1 duplicate)``."""
        return [f"{order}: {finding}" for order, each in self.orders.items() for finding in each.duplicate_findings()]

    @property
    def missing(self) -> list[str]:
        """Kinds some order has no effect of."""
        return [kind for kind in KINDS if any(kind in each.missing for each in self.orders.values())]

    @property
    def model_calls(self) -> int:
        return self._calls.model_calls

    @property
    def repeated_model_calls(self) -> int:
        return self._calls.repeated_model_calls

    @property
    def rejected_model_calls(self) -> int:
        return self._calls.rejected_model_calls

    @property
    def summaries(self) -> int:
        return self._calls.summaries

    @property
    def final_answer_served(self) -> bool:
        return self._calls.final_answer_served

    @property
    def finished(self) -> bool:
        """Every order complete, and the model gave the backlog's final answer (a summary is none)."""
        return len(self.complete) == len(self.orders) and self.final_answer_served

    @property
    def turns(self) -> int:
        """The model calls a correct run makes: one per tool turn, one per summary it asked for, the final answer."""
        return backlog_turns(self.order_id) + self.summaries + 1

    @property
    def events(self) -> list[Event]:
        """The model calls and every order's effects, in time order (an effect's label names its order)."""
        effects = [Event(e.at, e.pid, e.what, f"{e.label} {order}", e.repeat)
                   for order, each in self.orders.items() for e in each.events]
        return sorted(self._calls.events + effects, key=lambda e: e.at)

    @property
    def inconsistencies(self) -> list[str]:
        return [f"{order}: {words}" for order, each in self.orders.items() for words in each.inconsistencies]

    @property
    def verdict(self) -> str:
        """Every order's verdict when they agree (``completed``, ``not started``, ...), else ``inconsistent``."""
        verdicts = {each.verdict for each in self.orders.values()}
        return verdicts.pop() if len(verdicts) == 1 else "inconsistent"

    def unfinished(self) -> str:
        """Why the backlog is not finished, in words, for a verdict."""
        return "; ".join(self._unfinished_words()) or "the model never gave its final answer"

    def _unfinished_words(self) -> list[str]:
        lost = self.lost_words()
        return ([lost] if lost else []) + self.stuck_words()

    def describe_problems(self) -> list[str]:
        """Plain-language findings, as a single order's audit says them: duplicates per order, repeated model calls,
        the orders never started, each stuck order, or the final answer never given."""
        problems = self.duplicate_findings()
        if self.repeated_model_calls:
            problems.append(f"{self.repeated_model_calls} repeated model call(s)")
        if not self.finished:
            problems += self._unfinished_words() or ["not finished (the model never gave its final answer)"]
        return problems

    def as_dict(self) -> dict:
        return {"order_id": self.order_id, "orders": len(self.orders), "complete": len(self.complete),
                "stuck": self.stuck_words(), "lost": len(self.lost), "effects": self.counts,
                "duplicates": self.duplicates, "model_calls": self.model_calls,
                "repeated_model_calls": self.repeated_model_calls, "summaries": self.summaries,
                "final_answer_served": self.final_answer_served, "finished": self.finished}

    def as_json(self) -> dict:
        """Everything, as plain JSON: what the world's admin API sends to the harness (:func:`audit_from_json`)."""
        return {"backlog": self.order_id, "calls": self._calls.as_json(),
                "orders": {order: each.as_json() for order, each in self.orders.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "BacklogAudit":
        return cls(data["backlog"], {order: Audit.from_json(each) for order, each in data["orders"].items()},
                   Audit.from_json(data["calls"]))

    def __str__(self) -> str:
        problems = "; ".join(self.describe_problems()) or "clean"
        return (f"audit of backlog {self.order_id}: {len(self.orders)} orders -- {len(self.complete)} complete, "
                f"{len(self.stuck)} stuck, {len(self.lost)} lost; duplicates {self.duplicates}; model calls "
                f"{self.model_calls} (repeated {self.repeated_model_calls}, summaries {self.summaries}); finished "
                f"{self.finished} -- {problems}")

    __repr__ = __str__


def backlog_audit(ledger_dir: str | Path, backlog: str, *, seen: bool = False) -> BacklogAudit:
    """Read every ledger in ``ledger_dir`` once and report what happened to every order of ``backlog``. ``seen``:
    LedgerError when the world has no record of the backlog at all (a mistyped id, another world's backlog)."""
    ledger_dir = Path(ledger_dir)
    result = BacklogAudit(backlog, {order: Audit(order, effects={kind: [] for kind in KINDS})
                                    for order in backlog_orders(backlog)})
    for effect in read_effects(ledger_dir, "GLOB ?", f"{backlog}-[0-9][0-9][0-9]"):
        if effect["order_id"] in result.orders:
            add_effects(result.orders[effect["order_id"]], [effect])
    add_calls(result._calls, read_calls(ledger_dir, backlog))
    if seen and not result.model_calls and not any(any(each.counts.values()) for each in result.orders.values()):
        raise LedgerError(f"the world in {ledger_dir.parent} has no record of backlog {backlog}: no effect and no "
                          "model call for it (check the id, and --state)")
    return result


def audit_of(ledger_dir: str | Path, order_id: str, *, seen: bool = False) -> Audit | BacklogAudit:
    """The audit of ``order_id``: a backlog's (:func:`backlog_audit`) for a backlog id, else the order's."""
    if is_backlog(order_id):
        return backlog_audit(ledger_dir, order_id, seen=seen)
    return audit(ledger_dir, order_id, seen=seen)


def audit_from_json(data: dict) -> Audit | BacklogAudit:
    """An audit as the world's admin API sent it: a backlog's or an order's."""
    return BacklogAudit.from_json(data) if "backlog" in data else Audit.from_json(data)


__all__ = ["BacklogAudit", "audit_from_json", "audit_of", "backlog_audit"]
