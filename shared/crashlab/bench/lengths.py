"""The benchmark's length axis: each engine's long agent run to several lengths, its durable record measured as it
grows and its recovery timed after a SIGKILL at each length (:func:`measure_lengths`), one :class:`LongRow` per
engine, and the table that prints them beside the engines' per-step costs (:func:`long_table`).

The long agent (:func:`crashlab.engines.workload.long_step`, on the row each engine's registry entry names
``long_bench``) does what an agent does to its engine's record, without a model: each turn is one durable step
handed the conversation so far and returning a result of ``result_bytes`` bytes, which the next turns carry. Each
length ``n`` is one recovery scene: a process runs the agent into turn ``n`` and is SIGKILLed there, a new process
finishes it (replaying the ``n - 1`` turns recorded) and then reads the engine's own record of it
(:mod:`crashlab.engines.record`): the bytes held once each turn was recorded. ``bytes_at[n]`` is that total after
turn ``n``; the exponent is :func:`crashlab.engines.growth.growth_exponent` over the longest run's turn-by-turn
totals, the fit lesson 9 prints. Byte counts and exponents do not depend on the machine; recovery times do."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from crashlab.bench.common import joined
from crashlab.bench.spawn import Servers, recover_engine
from crashlab.engines.growth import growth_exponent, human_bytes
from crashlab.engines.registry import ENGINES

RESULT_BYTES = 1000  # a tool result's size per turn, as lesson 9's backlog measures with


@dataclass
class LongRow:
    """One engine's long agent on the length axis: ``bytes_at`` and ``recovery_s`` keyed by length (turns)."""

    engine: str
    bytes_at: dict[int, int] = field(default_factory=dict)
    recovery_s: dict[int, float] = field(default_factory=dict)
    exponent: float | None = None
    note: str = ""

    def bytes_per_turn(self, n: int) -> float | None:
        return self.bytes_at[n] / n if n in self.bytes_at else None


def long_variants(engines: Sequence[str]) -> list[str]:
    """The rows among ``engines`` that run their engine's long agent (each engine's ``long_bench``), in order."""
    wanted = {entry.long_bench for entry in ENGINES.values()}
    return [variant for variant in engines if variant in wanted]


def measure_lengths(engine: str, servers: Servers, workdir: Path, lengths: Sequence[int], result_bytes: int,
                    timeout: float, tick: Callable[[str], None] = lambda text: None) -> LongRow:
    """The long agent of ``engine`` at each of ``lengths``: a recovery scene each, SIGKILL in the last turn; every
    failure becomes the row's note, never an exception."""
    row = LongRow(engine)
    longest: list[int] = []
    for n in sorted(set(lengths)):
        try:
            got = recover_engine(engine, servers, workdir, n, timeout, kill_at=n, result_bytes=result_bytes)
            sizes = got["sizes"] or []
            row.recovery_s[n] = round(got["recovery_s"], 3)
            if len(sizes) < n:
                row.note = joined(row.note, f"at {n} turns the record showed {len(sizes)} turns")
            if sizes:
                row.bytes_at[n] = sizes[min(n, len(sizes)) - 1]
                longest = sizes
        except Exception as exc:  # noqa: BLE001 -- every failure becomes the row's note, never a traceback
            row.note = joined(row.note, f"{n} turns not measured: {exc}")
        tick(f"{engine} at {n} turns")
    try:
        row.exponent = growth_exponent(longest) if longest else None
    except ValueError as exc:
        row.note = joined(row.note, f"no exponent: {exc}")
    return row


def long_table(rows: Sequence[LongRow], lengths: Sequence[int], per_step_ms: dict[str, float | None],
               result_bytes: int) -> str:
    """The length axis as columns: each engine's per-step cost (from the main table), its record's bytes per turn at
    each length, the growth exponent, and the recovery time after a SIGKILL at each length."""
    lengths = sorted(set(lengths))
    if not rows:
        return ("no long agent was measured: the length axis runs on each engine's own row "
                f"({', '.join(entry.long_bench for entry in ENGINES.values())}); name one in --engines")
    head = ["long agent", "per step", *(f"B/turn@{n}" for n in lengths), "exponent",
            *(f"rec@{n}" for n in lengths)]
    lines = []
    for r in rows:
        step = per_step_ms.get(r.engine)
        lines.append([r.engine, f"{step:.3f} ms" if step is not None else "-",
                      *(human_bytes(b) if (b := r.bytes_per_turn(n)) is not None else "-" for n in lengths),
                      f"{r.exponent:.2f}" if r.exponent is not None else "-",
                      *(f"{r.recovery_s[n]:.2f} s" if n in r.recovery_s else "-" for n in lengths)])
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in [head, ["-" * w for w in widths],
                                                                                        *lines]]
    out.append(f"a turn: one durable step handed the conversation so far, {human_bytes(result_bytes)} result; "
               "B/turn: the engine's own record after n turns, / n; exponent: bytes ~ turns**k over the longest "
               "run; rec@n: a new process to the result after SIGKILL in turn n")
    notes = [f"{r.engine}: {r.note}" for r in rows if r.note]
    return "\n".join(out + (["", "long-agent notes:", *(f"  {note}" for note in notes)] if notes else []))


__all__ = ["RESULT_BYTES", "LongRow", "long_table", "long_variants", "measure_lengths"]
