"""What the frameworks lesson reads back after a run: each engine's own record of the order (Temporal's history,
DBOS's steps, LangGraph's checkpoint writes; Restate's journal is :mod:`.restate`'s) and the keys the world's
services saw. The
lesson's point is that a framework's "durable" is whatever lands in that record, so it is read from the engine's
store, never from what the agent says about itself."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from pathlib import Path

from crashlab.harness.verdicts import BASELINE
from crashlab.order import ORDER_ID


def in_own_loop(coroutine_function, *args):
    """Run an ``async`` reader to the end from a notebook cell, whose kernel already runs an event loop (so
    ``asyncio.run`` there would refuse): in a thread with a loop of its own."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine_function(*args))
        except BaseException as exc:  # handed back to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def temporal_activities(world, order_id: str = ORDER_ID) -> list[dict]:
    """The activities in the order's workflow history, in the order the history has them: one dict per event
    that schedules or completes one (``event``, ``what``, ``activity_type``, ``activity_id``)."""
    from crashlab.engines.temporal.client import connect, namespace_for

    async def read() -> list[dict]:
        client = await connect(namespace_for(world.agent_dir))
        scheduled, found = {}, []
        async for event in client.get_workflow_handle(order_id).fetch_history_events():
            if event.HasField("activity_task_scheduled_event_attributes"):
                attributes = event.activity_task_scheduled_event_attributes
                scheduled[event.event_id] = (attributes.activity_type.name, attributes.activity_id)
                found.append({"event": event.event_id, "what": "scheduled",
                              "activity_type": attributes.activity_type.name, "activity_id": attributes.activity_id})
            elif event.HasField("activity_task_completed_event_attributes"):
                kind, activity_id = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id,
                                                  ("?", "?"))
                found.append({"event": event.event_id, "what": "completed", "activity_type": kind,
                              "activity_id": activity_id})
        return found

    return in_own_loop(read)


def dbos_steps(world, order_id: str = ORDER_ID, database: str = "dbos.sqlite") -> list[str]:
    """The names of the order's workflow steps in DBOS's system database (the agent's SQLite file)."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=f"sqlite:///{Path(world.agent_dir) / database}")
    try:
        return [step["function_name"] for step in client.list_workflow_steps(order_id)]
    finally:
        client.destroy()


def checkpoint_writes(world, database: str = "checkpoints.sqlite", thread_id: str = ORDER_ID) -> list[str]:
    """The channels of the writes LangGraph's SQLite checkpointer saved for one thread, oldest first: with the
    functional API, one ``__return__`` per finished ``@task``."""
    path = Path(world.agent_dir) / database
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return [channel for (channel,) in db.execute("SELECT channel FROM writes WHERE thread_id = ? ORDER BY rowid",
                                                     (thread_id,))]


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
