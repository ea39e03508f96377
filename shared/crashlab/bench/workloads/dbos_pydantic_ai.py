"""Pydantic AI on DBOS in the benchmark (``dbos+pydantic-ai``): the bare DBOS row's set-up on SQLite, running the
benchmark's agent (:mod:`crashlab.bench.workloads.pai`) with ``DBOSDurability`` inside our own async
``@DBOS.workflow``. The capability makes each model request a step; it leaves function tools alone, so the tool's
work goes through ``@DBOS.step`` too, as an agent that wants its tool calls recorded must do. Each step is then
two DBOS steps: the model request and the tool call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crashlab.bench.workloads import dbos, pai
from crashlab.bench.workloads.base import Workload

PRELOAD = pai.PRELOAD


class PydanticAIDbos(dbos.Dbos):
    def define(self):
        from dbos import DBOS
        from pydantic_ai.durable_exec.dbos import DBOSDurability

        agent = pai.build_agent(capabilities=[DBOSDurability()],
                                tool_step=DBOS.step(name=f"{pai.AGENT_NAME}__step"))

        @DBOS.workflow()
        async def pydantic_ai_bench_workflow(n: int) -> int:
            result = await agent.run(pai.prompt(n))
            return pai.steps_done(result.output)

        self.loop = asyncio.new_event_loop()
        return pydantic_ai_bench_workflow

    def call(self, n: int) -> int:
        return self.loop.run_until_complete(self.workflow(n))

    def start_recoverable(self, n: int, wid: str) -> None:
        from dbos import SetWorkflowID

        with SetWorkflowID(wid):
            self.call(n)

    def resume(self, n: int, wid: str) -> Any:
        return self.DBOS.retrieve_workflow(wid).get_result(polling_interval_sec=0.05)  # launch() is recovering it

    def close(self) -> None:
        super().close()
        self.loop.close()


def make(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return dbos.make(variant, workdir, recovery, kind=PydanticAIDbos)


def unavailable(variant: str) -> str | None:
    return pai.unavailable() or dbos.unavailable(variant)


def note(variant: str) -> list[str]:
    return ["each step is two DBOS steps, the model request and the tool call (DBOSDurability makes only the model "
            "request a step; the tool is wrapped in @DBOS.step)"]


def recovery_note(variant: str) -> list[str]:
    return dbos.recovery_note(variant)
