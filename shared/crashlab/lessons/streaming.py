"""The streaming lesson's helpers: what the user's screen shows of an order, with the screen's verdict, and what one
streamed chunk costs on each path a relay can take, against a floor measured in the same run.

Both read the world (its screen ledger, its audit) or time real writes; neither asks an agent what it did."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from crashlab.harness.verdicts import judge_screen
from crashlab.order import ORDER_ID
from crashlab.plumbing.lines import fit


def user_saw(world, label: str, order_id: str = ORDER_ID, point: str | None = None) -> str:
    """Lines for a notebook: ``label``, what the user's screen shows for ``order_id`` now (turns run together, as a
    chat bubble's text does), and the screen's audit -- judged as a crash matrix's row at ``point`` would be (one
    retraction allowed where the user watched an answer that never arrived whole), or as a plain audit."""
    text = world.screen(order_id)["text"]
    audit = world.screen_audit(order_id)
    problems = judge_screen(point, audit) if point else audit.describe_problems()
    verdict = "; ".join(p.removeprefix(f"{point}: ") for p in problems) if problems else "every word once: clean"
    retractions = f"{audit.retractions} retraction{'s' * (audit.retractions != 1)}"
    return "\n".join([label, fit(f"  the screen: {json.dumps(text)}", indent="    "),
                      fit(f"  {audit.shows} shows, {retractions}; {verdict}", indent="    ")])


def _per_call(write: Callable[[int], object], chunks: int) -> float:
    start = time.perf_counter()
    for i in range(chunks):
        write(i)
    return (time.perf_counter() - start) / chunks


def chunk_costs(order_id: str, chunks: int = 100, repeats: int = 3,
                extra: dict[str, Callable[[int], object]] | None = None) -> dict[str, float]:
    """Seconds per chunk, the median of ``repeats`` runs of ``chunks`` writes each: ``floor``, an append of one JSON
    line and an ``fsync`` (what lesson 1's log pays per record); ``screen``, one show on the user's screen of
    ``order_id`` (a relay's price per chunk: an HTTP request and a row in the screen's SQLite ledger); and each of
    ``extra`` (a name and a function that writes chunk ``i``), timed the same way in the same run."""
    from crashlab.agent import show
    from crashlab.bench.floor import Floor

    with tempfile.TemporaryDirectory() as folder:
        floor = Floor(Path(folder))  # the benchmark's floor, one line at a time: the same figure as its table's
        paths = {"floor": lambda i: floor.run(1), "screen": lambda i: show(order_id, " word", turn=1, chunk=i),
                 **(extra or {})}
        return {name: statistics.median(_per_call(write, chunks) for _ in range(repeats))
                for name, write in paths.items()}


def cost_lines(costs: dict[str, float], described: dict[str, str]) -> list[str]:
    """One line per path, its time per chunk and its multiple of this run's floor, cheapest first; then which path
    was dearest on this run. ``described``: the words for each path's name."""
    floor = costs["floor"]
    lines = [f"{described.get(name, name):48} {seconds * 1000:8.3f} ms a chunk  {seconds / floor:6.1f} x the floor"
             for name, seconds in sorted(costs.items(), key=lambda item: item[1])]
    dearest = max(costs, key=costs.__getitem__)
    lines.append(f"dearest on this run: {described.get(dearest, dearest)}, "
                 f"{costs[dearest] / floor:.1f} times an append and fsync")
    return lines


__all__ = ["chunk_costs", "cost_lines", "user_saw"]
