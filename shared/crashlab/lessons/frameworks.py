"""What the frameworks lesson reads back after a run besides each engine's own record of the order (which each
engine's folder reads: :mod:`crashlab.engines.record`): the keys the world's services saw, and its tables and
figures. The lesson's point is that a framework's "durable" is whatever lands in that record, so it is read from
the engine's store, never from what the agent says about itself."""

from __future__ import annotations

from crashlab.harness.verdicts import BASELINE
from crashlab.order import ORDER_ID


def effect_keys(world, order_id: str = ORDER_ID) -> list[tuple[str, str | None]]:
    """Each effect the services committed for the order, oldest first, with the idempotency key its request
    carried (None: it sent none): from the world's audit, which reads the ledgers no agent can write."""
    effects = world.audit(order_id).effects
    found = [(effect["at"], kind, effect.get("idempotency_key")) for kind, rows in effects.items() for effect in rows]
    return [(kind, key) for _, kind, key in sorted(found, key=lambda effect: effect[0])]


def markdown_table(header: list[str], rows: list[list]):
    """A table a notebook shows as Markdown (each cell's text as given, ``|`` escaped)."""
    from IPython.display import Markdown

    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return Markdown("\n".join(lines))


def median_recovery(matrix) -> float | None:
    """The median recovery time (the resume's wall time) over a matrix's crashed rows, in seconds."""
    times = sorted(row.recovery_s for row in matrix.rows if row.recovery_s is not None and row.point != BASELINE)
    if not times:
        return None
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
