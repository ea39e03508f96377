"""Pydantic AI on Temporal in the benchmark (``temporal+pydantic-ai``): the bare Temporal row's client and
in-process worker, running :mod:`crashlab.bench.workloads.pai_temporal_workflow` with Pydantic AI's plugin on
the client (its data converter, its sandbox pass-throughs, and the agent's activities registered on the worker).
Each step is two activities: the model request and the tool call."""

from __future__ import annotations

from pathlib import Path

from crashlab.bench.workloads import pai, temporal
from crashlab.bench.workloads.base import Workload

PRELOAD = (*temporal.PRELOAD, *pai.PRELOAD, "crashlab.bench.workloads.pai_temporal_workflow")


class PydanticAITemporal(temporal.Temporal):
    def parts(self) -> tuple[type, list, list]:
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

        from crashlab.bench.workloads.pai_temporal_workflow import PydanticAIBenchWorkflow

        return PydanticAIBenchWorkflow, [], [PydanticAIPlugin()]

    @property
    def executed(self) -> int:
        return Workload.executed.fget(self)  # the tool's step_body counts itself


def make(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return temporal.make(variant, workdir, recovery, kind=PydanticAITemporal)


def unavailable(variant: str) -> str | None:
    return pai.unavailable() or temporal.unavailable(variant)


def note(variant: str) -> list[str]:
    return ["each step is two activities, the model request and the tool call"]


def recovery_note(variant: str) -> list[str]:
    return temporal.recovery_note(variant)
