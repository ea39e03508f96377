"""How an engine's durable record grows with the agent's work: the bytes stored once each turn was recorded, read from
the engine's own record, and the growth exponent fitted to them. The long-haul lesson and the benchmark's length
axis both measure with these, so that a notebook's exponent and ``crashlab bench --lengths``' are the same figure."""

from __future__ import annotations

import math
from typing import Callable, Sequence

from crashlab.engines.record import Entry, Record


def bytes_by_turn(record: Record, ends_turn: Callable[[Entry], bool]) -> list[int]:
    """The bytes the engine had stored once each tool turn was recorded: element ``n - 1`` is the total of every
    entry up to the one that ends turn ``n`` (``ends_turn``), in the order the engine keeps them."""
    found, total = [], 0
    for entry in record:
        total += entry.size
        if ends_turn(entry):
            found.append(total)
    return found


def growth_exponent(sizes: Sequence[float], first_turn: int = 1) -> float:
    """The exponent k of ``bytes ~ turns**k``: the least-squares slope of log bytes on log turns over the upper three
    quarters of the turns (the first few are dominated by what every run stores once: the task, the first reply).
    ``sizes[i]`` is the size after turn ``first_turn + i``. Near 1: linear growth; near 2: quadratic."""
    points = [(math.log(first_turn + i), math.log(s)) for i, s in enumerate(sizes) if s > 0]
    points = points[len(points) // 4:]
    if len(points) < 2:
        raise ValueError(f"an exponent needs at least two sizes past the first quarter, got {len(sizes)} sizes")
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    spread = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / spread


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KB``; decimal units, as the engines' limits are stated in the lesson's prose."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover -- the loop returns


__all__ = ["bytes_by_turn", "growth_exponent", "human_bytes"]
