"""The engine registry: one entry per durable-execution engine the course runs (:class:`~.engine.Engine`, defined in
the engine's own folder), and what the rest of the course reads from them. ``needs`` (the servers a crash matrix
needs), the grader's sandbox and isolation (what a student's process may see), the benchmark, the demo, the soak,
the command line and the lessons' preloads all read it; nothing outside an engine's own folder asks
``if engine == ...``.

Adding an engine is its folder under :mod:`crashlab.engines` (its ``ENGINE``, its record reader, its benchmark
workload, its server if it has one) and one line here; see the README's "Adding an engine".
"""

from __future__ import annotations

from crashlab.engines import dbos, langgraph, restate, temporal
from crashlab.engines.engine import Engine, Integration
from crashlab.engines.record import Record, Store
from crashlab.order import ORDER_ID

ENGINES: dict[str, Engine] = {e.name: e for e in (langgraph.ENGINE, dbos.ENGINE, temporal.ENGINE, restate.ENGINE)}
FLOOR_COLOUR = "#8c8c8c"  # the benchmark's fsync floor, which is no engine


def engine(name: str) -> Engine:
    """The entry for ``name``, or a one-line ValueError naming the engines there are."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}: the course runs {', '.join(ENGINES)}") from None


def read_record(name: str, world: object, order_id: str = ORDER_ID, *, database: str | None = None,
                server: str | None = None) -> Record:
    """What engine ``name`` recorded of ``order_id`` in ``world`` (a World or its agent state folder), read from the
    engine's own store: ``database`` and ``server`` as :class:`~crashlab.engines.record.Store` takes them."""
    return engine(name).record.read(Store.of(world, database, server), order_id)


def with_server() -> tuple[str, ...]:
    """The engines whose server the course starts (what a lesson's ``needs`` and ``--needs`` may name)."""
    return tuple(name for name, e in ENGINES.items() if e.server is not None)


def integrations() -> tuple[str, ...]:
    """Every framework integration's benchmark row, in the registry's order."""
    return tuple(i.variant for e in ENGINES.values() for i in e.integrations)


def student_env() -> frozenset[str]:
    """What a student's process may see of the engines: their agents' variables and their servers' binaries."""
    return frozenset(name for e in ENGINES.values() for name in e.student_env)


def server_binaries() -> tuple[str, ...]:
    """The variables that name the engines' server binaries (the grader passes them on to the student's kernel)."""
    return tuple(e.server.binary_env for e in ENGINES.values() if e.server is not None)


def engine_of_variant(variant: str) -> Engine | None:
    """The engine a benchmark variant (``dbos-postgres``, or an integration's ``dbos+pydantic-ai``) runs on: its
    server, its colour; None for the floor."""
    return next((e for e in ENGINES.values()
                 if variant in e.bench or any(i.variant == variant for i in e.integrations)), None)


def integration_of_variant(variant: str) -> Integration | None:
    """The framework integration a benchmark variant is (``temporal+pydantic-ai``); None for an engine's own row."""
    return next((i for e in ENGINES.values() for i in e.integrations if i.variant == variant), None)


def imports_of_variant(variant: str) -> tuple[str, ...]:
    """What a benchmark variant's processes import before they work: its engine's, and its framework's."""
    entry, integration = engine_of_variant(variant), integration_of_variant(variant)
    return (*(entry.imports if entry else ()), *(integration.imports if integration else ()))


def missing_fields() -> list[str]:
    """Every entry's empty required field, as ``engine.field`` or ``variant.field`` (a test keeps this empty)."""
    optional = {"server", "integrations"}
    own_api = {"packages"}  # an integration through the engine's own API (LangGraph's functional one) adds none
    return [f"{e.name}.{name}" for e in ENGINES.values() for name, value in vars(e).items()
            if name not in optional and not value] + \
        [f"{i.variant}.{name}" for e in ENGINES.values() for i in e.integrations for name, value in vars(i).items()
         if name not in own_api and not value]


__all__ = ["ENGINES", "FLOOR_COLOUR", "Engine", "Integration", "engine", "engine_of_variant", "imports_of_variant",
           "integration_of_variant", "integrations", "missing_fields", "read_record", "server_binaries", "student_env",
           "with_server"]
