"""What every part of the benchmark shares: its rows (the fsync floor and every engine's variants, measured by
default; the frameworks' integrations, measured when asked), each row's workload, read from the engine registry,
and the variables a child process never inherits from the caller's own environment."""

from __future__ import annotations

from crashlab.bench.floor import FloorWorkloads
from crashlab.engines import registry
from crashlab.engines.workload import ENV_BLOCK_AT, ENV_MARKER, BenchError, Workloads

FLOOR = "floor"


def engine_rows() -> tuple[str, ...]:
    """The rows a run measures by default: the fsync floor first, then every engine's variants in the registry's
    order."""
    return (FLOOR, *(variant for entry in registry.ENGINES.values() for variant in entry.bench))


def variants() -> tuple[str, ...]:
    """Every row a run can measure: the engines' own, then the frameworks' integrations (asked for by name, each
    measured beside its engine's row: ``run_benchmark(engines=["temporal", "temporal+pydantic-ai"])``)."""
    return (*engine_rows(), *registry.integrations())


def workloads_for(variant: str) -> Workloads:
    """How a row runs: an integration's own workload (``dbos+pydantic-ai``), its engine's (``dbos-postgres``), or the
    floor's."""
    entry, integration = registry.engine_of_variant(variant), registry.integration_of_variant(variant)
    return integration.workload if integration else entry.workload if entry else FloorWorkloads()


def child_scrubbed() -> tuple[str, ...]:
    """What a child process never inherits from the caller's environment: the recovery scene's switches, and every
    variable through which an engine's server or a workload's database is found (the child gets its own)."""
    return (ENV_BLOCK_AT, ENV_MARKER,
            *dict.fromkeys(name for entry in registry.ENGINES.values()
                           for workload in (entry.workload, *(i.workload for i in entry.integrations))
                           for name in (*entry.env, *workload.env)))


def joined(*notes: str | None) -> str:
    """A row's notes, as one: ``"a; b"``, leaving out the empty ones."""
    return "; ".join(n for n in notes if n)


__all__ = ["FLOOR", "BenchError", "child_scrubbed", "engine_rows", "joined", "variants", "workloads_for"]
