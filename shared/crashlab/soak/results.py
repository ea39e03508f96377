"""What a soak found, per order and in all: judged from the world's ledgers only, never from what an agent said.

An order passes when it finished (through the failure path: ended cleanly undone), no effect happened twice, and
every effect was the order's own: charged its own amount and reserved its own SKU
(:func:`crashlab.order.order_details`), so an agent that charged one order's amount to another, or charged a fixed
amount, is caught."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.world.audit import Audit
from crashlab.order import effect_mismatches
from crashlab.plumbing.outputs import SOAK, write_output


@dataclass
class OrderResult:
    order_id: str
    processes: int = 0
    kills: int = 0
    rounds: int = 0
    errors: list[str] = field(default_factory=list)  # last line of each non-zero exit that was not our kill
    audit: Audit | None = None
    seconds: float = 0.0
    fail: str | None = None  # the step that failed for good for the order: it must end cleanly undone
    may_undo: bool = False  # the order may also end cleanly undone (a step that gave up, by design)

    @property
    def duplicates(self) -> int:
        return self.audit.duplicates if self.audit else 0

    @property
    def lost(self) -> bool:
        """Not finished -- or, through the failure path, not cleanly undone -- when the soak gave up on it; with
        ``may_undo``, neither finished nor cleanly undone."""
        if self.audit is None:
            return True
        undone = self.audit.verdict == "cleanly undone"
        if self.fail is not None:
            return not undone
        return not (self.audit.finished or (self.may_undo and undone))

    @property
    def gave_up(self) -> bool:
        """Nothing failed for good, yet the order ended cleanly undone: a step gave up (allowed with ``may_undo``)."""
        return self.fail is None and self.audit is not None and self.audit.verdict == "cleanly undone"

    @property
    def mismatches(self) -> list[str]:
        """Effects that are not this order's own: another amount charged, another SKU reserved."""
        return effect_mismatches(self.order_id, self.audit.effects) if self.audit else []

    @property
    def ok(self) -> bool:
        return not self.duplicates and not self.lost and not self.mismatches

    def why(self) -> str:
        problems = self.audit.describe_problems() if self.audit else ["not audited"]
        problems = [p for p in problems if "repeated model call" not in p] + self.mismatches
        text = "; ".join(problems)
        if self.lost and self.errors:
            text += f" -- last agent error: {self.errors[-1]}"
        return f"{text} ({self.processes} processes, kills {self.kills}, resume rounds {self.rounds})"

    def as_dict(self) -> dict:
        return {"order_id": self.order_id, "processes": self.processes, "kills": self.kills, "rounds": self.rounds,
                "agent_errors": len(self.errors), "errors": self.errors[-3:], "seconds": round(self.seconds, 2),
                "gave_up": self.gave_up,
                "audit": self.audit.as_dict() if self.audit else None, "wrong_effects": self.mismatches,
                "ok": self.ok}


@dataclass
class SoakResult:
    agent: str
    settings: dict
    orders: list[OrderResult]
    world_kills: int
    outages: list[float]
    seconds: float
    flaky: list[float] = field(default_factory=list)
    flaky_refused: int = 0
    world_deaths: int = 0  # times the world died on its own (not a fault of the soak's) and was restarted
    unaudited: list[str] = field(default_factory=list)  # orders whose audit the world did not answer
    unfired: list[str] = field(default_factory=list)  # directed faults whose order never had the tool's effect
    fault_log: list[dict] = field(default_factory=list)  # each fault fired: label, began, ended (epoch seconds)
    pauses: list[float] = field(default_factory=list)  # the world frozen (SIGSTOP), seconds each

    processes = property(lambda self: sum(o.processes for o in self.orders))
    kills = property(lambda self: sum(o.kills for o in self.orders))
    duplicates = property(lambda self: sum(o.duplicates for o in self.orders))
    lost = property(lambda self: sum(o.lost for o in self.orders))
    wrong_effects = property(lambda self: sum(len(o.mismatches) for o in self.orders))
    agent_errors = property(lambda self: sum(len(o.errors) for o in self.orders))
    repeated_model_calls = property(lambda self: sum(o.audit.repeated_model_calls for o in self.orders if o.audit))
    gave_up = property(lambda self: sum(o.gave_up for o in self.orders))

    @property
    def extra_model_calls(self) -> int | None:
        """Model calls beyond what the orders cost in a clean run (the calibration run's count per order): with no
        kills, what stalls and timeouts made the agents pay for again -- zombie attempts, among others."""
        clean = self.settings.get("clean_model_calls")
        audits = [o.audit for o in self.orders if o.audit is not None]
        if clean is None or not audits:
            return None
        return sum(a.model_calls for a in audits) - clean * len(audits)

    @property
    def ok(self) -> bool:
        return bool(self.orders) and self.duplicates == 0 and self.lost == 0 and self.wrong_effects == 0

    def figures(self) -> dict:
        return {"orders": len(self.orders), "processes": self.processes, "kills": self.kills,
                "world_kills": self.world_kills, "outages": len(self.outages), "flaky_periods": len(self.flaky),
                "flaky_refused": self.flaky_refused, "duplicates": self.duplicates, "lost": self.lost,
                "wrong_effects": self.wrong_effects, "repeated_model_calls": self.repeated_model_calls,
                "agent_errors": self.agent_errors, "undone_after_give_up": self.gave_up, "pauses": len(self.pauses),
                "extra_model_calls": self.extra_model_calls,
                "world_deaths": self.world_deaths, "unaudited": len(self.unaudited),
                "faults_not_fired": self.unfired, "seconds": round(self.seconds, 1)}

    def as_dict(self) -> dict:
        return {"agent": self.agent, "settings": self.settings, **self.figures(), "ok": self.ok,
                "fault_log": self.fault_log,
                "failed": {o.order_id: o.why() for o in self.orders if not o.ok},
                "per_order": [o.as_dict() for o in self.orders]}

    def write_json(self, path: str | os.PathLike, *, force: bool = False) -> None:
        """Atomically; an existing file other than a soak summary is refused (:mod:`crashlab.plumbing.outputs`) unless ``force``."""
        write_output(path, json.dumps(self.as_dict(), indent=2) + "\n", SOAK, force=force)

    def __str__(self) -> str:
        s = self.settings
        faults = ", ".join(s["world_faults"]) or "none"
        needs = f", needs: {', '.join(s['needs'])}" if s.get("needs") else ""
        path = f", failure path: {s['fail']} fails for good" if s.get("fail") else ""
        lines = [f"soak of {Path(self.agent).name}: resumers {s['resumers']}, kills {s['kills']} "
                 f"(0-{s['kill_window']:g} s), world faults: {faults}{needs}{path}, seed {s['seed']}"]

        def spans(seconds: list[float]) -> str:
            return f"({', '.join(f'{o:g} s' for o in seconds)})" if seconds else ""

        rows = [("orders", len(self.orders), "each with its own amount and SKU"),
                ("processes started", self.processes, ""),
                ("kills", self.kills, "SIGKILLs that hit a running agent"),
                ("world kills", self.world_kills, ""),
                ("world outages", len(self.outages), spans(self.outages)),
                ("flaky periods", len(self.flaky), spans(self.flaky) + (f", {self.flaky_refused} requests answered "
                                                                        "503/529" if self.flaky else "")),
                ("duplicates", self.duplicates, "effects beyond the first, from the world's ledgers"),
                ("lost orders", self.lost, "not finished when the soak gave up on them" if not s.get("fail") else
                  "not cleanly undone when the soak gave up on them"),
                *([("undone after a give-up", self.gave_up, "nothing failed for good, a step gave up by design: "
                    "the order was undone, nothing left taken")] if s.get("may_undo") or self.gave_up else []),
                *([("world deaths", self.world_deaths, "the world died on its own and was restarted on its state")]
                  if self.world_deaths else []),
                ("wrong amount or SKU", self.wrong_effects, "effects that were not the order's own"),
                ("repeated model calls", self.repeated_model_calls, "answers asked for again (a kill right after an "
                                                                  "answer costs one, unavoidably)"),
                *([("world pauses", len(self.pauses), spans(self.pauses)),
                   ("extra model calls", self.extra_model_calls, f"beyond a clean run's {s.get('clean_model_calls')} "
                                                                 "per order: paid for what a stall or a kill lost")]
                  if self.pauses else []),
                ("agent errors", self.agent_errors, "non-zero exits other than our kills"
                 + ("; expected while the world is down or flaky" if s["world_faults"] else "")),
                ("seconds", f"{self.seconds:.1f}", "")]
        lines += [f"  {name:<22}{value!s:>7}  {note}".rstrip() for name, value, note in rows]
        if self.unaudited:
            lines.append(f"the world did not answer the audit of {len(self.unaudited)} order(s) "
                         f"({', '.join(self.unaudited[:5])}{' ...' if len(self.unaudited) > 5 else ''}): "
                         "they count as lost")
        if self.unfired:
            lines.append(f"directed fault(s) never fired, their order never had the tool's effect: "
                         f"{', '.join(self.unfired)}")
        failed = [o for o in self.orders if not o.ok]
        if failed:
            lines.append(f"failed orders ({len(failed)}):")
            lines += [f"  - {o.order_id}: {o.why()}" for o in failed[:20]]
            if len(failed) > 20:
                lines.append(f"  ... and {len(failed) - 20} more (see --json)")
        lines.append("PASS: 0 duplicates, 0 lost orders, every effect the order's own" if self.ok else
                     f"FAIL: {self.duplicates} duplicate(s), {self.lost} lost order(s), {self.wrong_effects} wrong "
                     "amount(s) or SKU(s)")
        return "\n".join(lines)

    __repr__ = __str__


__all__ = ["OrderResult", "SoakResult"]
