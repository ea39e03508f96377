"""LangGraph's record of an order: what its SQLite checkpointer saved for the order's thread -- each checkpoint (the
graph's state after a step) and, after it, the writes of the tasks that ran from it, each with its size as stored
(the checkpoint's and its metadata's bytes; a write's value). ``turn`` is LangGraph's step: a checkpoint's own
(``-1`` for the input), and for a write, the step of the tasks that wrote it."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from crashlab.engines.record import Entry, Record, Store
from crashlab.order import ORDER_ID

DATABASE = "checkpoints.sqlite"  # the file the lessons' agents give SqliteSaver, in their state folder


def _connect(path: str) -> contextlib.closing[sqlite3.Connection]:
    if "://" in path:
        raise ValueError(f"LangGraph's record is read from its SQLite file, not from {path}")
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


class CheckpointReader:
    what = ("checkpoints: the graph's whole state after each step, and each task's writes (a functional API task's "
            "result is its write)")

    def read(self, store: Store, order_id: str) -> Record:
        path = store.file(DATABASE)
        if not Path(path).exists():
            return Record("langgraph", order_id, ())
        with _connect(path) as db:
            checkpoints = db.execute(
                "SELECT checkpoint_id, length(checkpoint) + length(metadata), metadata FROM checkpoints "
                "WHERE thread_id = ? ORDER BY rowid", (order_id,)).fetchall()
            writes = db.execute("SELECT checkpoint_id, channel, length(value) FROM writes WHERE thread_id = ? "
                                "ORDER BY rowid", (order_id,)).fetchall()
        entries: list[Entry] = []
        for checkpoint_id, size, metadata in checkpoints:
            step = _step(metadata)
            entries.append(Entry("checkpoint", "", int(size or 0), step))
            entries += [Entry("write", channel, int(length or 0), None if step is None else step + 1)
                        for of, channel, length in writes if of == checkpoint_id]
        saved = {checkpoint_id for checkpoint_id, _, _ in checkpoints}
        entries += [Entry("write", channel, int(length or 0)) for of, channel, length in writes if of not in saved]
        return Record("langgraph", order_id, tuple(entries))


def _step(metadata: bytes | str | None) -> int | None:
    try:
        step = json.loads(metadata or b"{}").get("step")
    except (ValueError, AttributeError):
        return None
    return step if isinstance(step, int) else None


def checkpoint_writes(world: object, database: str = DATABASE, thread_id: str = ORDER_ID) -> list[str]:
    """The channels of the writes LangGraph's SQLite checkpointer saved for one thread, in the order it saved them:
    with the functional API, one ``__return__`` per finished ``@task``."""
    with _connect(Store.of(world, database).file(DATABASE)) as db:
        return [channel for (channel,) in db.execute("SELECT channel FROM writes WHERE thread_id = ? ORDER BY rowid",
                                                     (thread_id,))]


__all__ = ["DATABASE", "CheckpointReader", "checkpoint_writes"]
