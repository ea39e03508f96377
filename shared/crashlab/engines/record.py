"""An engine's durable record of one order, read from the engine's own store: the entries it keeps, in order, each
with its kind, its name, the bytes stored for it and, where the engine numbers them, the step it belongs to.

Every engine's entry in the registry has a :class:`RecordReader` (``engine("dbos").record``); each reads what that
engine keeps -- Temporal's workflow history (through the client), LangGraph's checkpoints and writes (its SQLite
file), DBOS's workflow input, step outputs and workflow output (its system database), Restate's journal (its admin
SQL API) -- and none trusts what the agent says about itself::

    record = engine("dbos").record.read(Store.of(world), "ORD-8842")
    record.names("step")                   # ['call_model', 'charge_card', ...]
    record.size                            # bytes stored for the order
    [(e.turn, e.size) for e in record]     # what each step added
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Protocol, runtime_checkable


@dataclass(frozen=True)
class Entry:
    """One thing an engine stored for an order.

    ``kind``: the engine's own word for it (a history event's type, ``step``, ``checkpoint``, ``write``, a journal
    entry's type); ``name``: what it is about (the activity, step, channel or ``ctx.run`` name; ``""`` for none);
    ``size``: the bytes the engine stored for it; ``turn``: the step it belongs to where the engine numbers steps
    (DBOS's function id, LangGraph's step), else None."""

    kind: str
    name: str
    size: int
    turn: int | None = None


@dataclass(frozen=True)
class Record:
    """An engine's record of one order: its entries in the order the engine keeps them."""

    engine: str
    order_id: str
    entries: tuple[Entry, ...]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def size(self) -> int:
        """Bytes stored for the order, all entries together."""
        return sum(entry.size for entry in self.entries)

    def names(self, kind: str | None = None) -> list[str]:
        """The names of the entries (of one ``kind``), in order, leaving out those without a name."""
        return [e.name for e in self.entries if e.name and (kind is None or e.kind == kind)]


@dataclass(frozen=True)
class Store:
    """Where an engine keeps one world's records: the agents' state folder (their databases, and the names their
    processes chose there: a Temporal namespace, a Restate service), a database file in it or a database URL where
    the engine takes one (None: the file the lessons' agents use), and the engine server's address where it has
    one (Temporal's frontend, Restate's admin API; None: the one in this process's environment)."""

    agent_dir: Path
    database: str | None = None
    server: str | None = None

    @classmethod
    def of(cls, world: object, database: str | None = None, server: str | None = None) -> Store:
        """The store of ``world``: a :class:`~crashlab.world.World` (its ``agent_dir``) or an agent state folder."""
        agent_dir = getattr(world, "agent_dir", world)
        if not isinstance(agent_dir, (str, os.PathLike)):
            raise TypeError(f"a store is a world or its agent state folder, not {type(world).__name__}")
        return cls(Path(agent_dir), database, server)

    def file(self, default: str) -> str:
        """The database: a URL as given, else a file in the agent state folder (``default`` if none was named)."""
        name = self.database or default
        return name if "://" in name else str(self.agent_dir / name)


@runtime_checkable
class RecordReader(Protocol):
    """How one engine's record is read. ``what``: what the engine records, in a sentence (tables and prose say it)."""

    what: str

    def read(self, store: Store, order_id: str) -> Record:
        """The engine's record of ``order_id`` in ``store``: every entry, in order; empty if it kept none."""
        ...


__all__ = ["Entry", "Record", "RecordReader", "Store"]
