"""DBOS's record of an order: what its system database keeps for the order's workflow -- the workflow's input,
each step's output (or error) as DBOS serialised it, and the workflow's output -- each with its size as stored.
``turn`` is the step's function id, DBOS's own count of the workflow's steps (None for the input and the output).

The system database is the agent's SQLite file (``dbos.sqlite`` in its state folder) or a PostgreSQL URL (the
``dbos`` schema)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any, Iterator

from crashlab.engines.record import Entry, Record, Store
from crashlab.order import ORDER_ID

CLOSED = '"__DBOS_STREAM_CLOSED__"'  # DBOS's close marker, as its streams table keeps it (JSON)
DATABASE = "dbos.sqlite"  # the file the lessons' agents give DBOS as its system database, in their state folder
_QUERIES = (  # (kind, query): one row per entry, in order, as (name, size, turn)
    ("input", "SELECT '', length(inputs), NULL FROM {s}workflow_input WHERE workflow_uuid = {p}"),
    ("step", "SELECT function_name, coalesce(length(output), 0) + coalesce(length(error), 0), function_id "
             "FROM {s}operation_outputs WHERE workflow_uuid = {p} ORDER BY function_id"),
    ("output", "SELECT '', coalesce(length(output), 0) + coalesce(length(error), 0), NULL FROM {s}workflow_output "
               "WHERE workflow_uuid = {p}"),
)


@contextlib.contextmanager
def _rows(database: str) -> Iterator[Any]:
    """``run(query, workflow_id)`` over the system database, SQLite or PostgreSQL, read only."""
    if database.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(database) as conn:
            yield lambda query, wid: conn.execute(query.format(s="dbos.", p="%s"), (wid,)).fetchall()
    else:
        path = database.removeprefix("sqlite:///")
        if not Path(path).exists():
            yield lambda query, wid: []
            return
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            yield lambda query, wid: conn.execute(query.format(s="", p="?"), (wid,)).fetchall()


class SystemDatabaseReader:
    what = ("the workflow's input, each step's output (or error) once the step is done, and the workflow's output, "
            "in its system database")

    def read(self, store: Store, order_id: str) -> Record:
        entries = []
        with _rows(store.file(DATABASE)) as run:
            for kind, query in _QUERIES:
                entries += [Entry(kind, name or "", int(size or 0), turn) for name, size, turn in run(query, order_id)]
        return Record("dbos", order_id, tuple(entries))


def dbos_stream(world: object, order_id: str = ORDER_ID, key: str = "answer",
                database: str = DATABASE) -> list[tuple[int, int, bool]]:
    """A DBOS stream of the order's workflow as its system database keeps it: ``(offset, function id, closed)`` per
    value -- the function id says which step (or which operation of the workflow) wrote it, ``closed`` marks DBOS's
    close marker. Values are not read: DBOS pickles them, and unpickling another's data runs its code."""
    query = ('SELECT key, "offset", function_id, serialization, value FROM {s}streams WHERE workflow_uuid = {p} '
             'ORDER BY "offset"')
    with _rows(Store.of(world, database).file(DATABASE)) as run:
        return [(int(offset), int(function_id), serialization == "portable_json" and value == CLOSED)
                for name, offset, function_id, serialization, value in run(query, order_id) if name == key]


def dbos_steps(world: object, order_id: str = ORDER_ID, database: str = DATABASE) -> list[str]:
    """The names of the order's workflow steps in DBOS's system database (the agent's SQLite file)."""
    return SystemDatabaseReader().read(Store.of(world, database), order_id).names("step")


__all__ = ["DATABASE", "SystemDatabaseReader", "dbos_steps", "dbos_stream"]
