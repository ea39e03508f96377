"""Pydantic AI on Restate in the benchmark (``restate+pydantic-ai``): the bare Restate row's endpoint and client,
serving a handler that runs the benchmark's agent (:mod:`crashlab.bench.workloads.pai`) through
``restate.ext.pydantic.RestateAgent``. With ``auto_wrap_tools=True`` the integration journals each model request
("Model call") and each tool call ("Calling step") as a ``ctx.run`` entry: each step is two journal entries."""

from datetime import timedelta
from pathlib import Path

import restate  # at the top: the SDK reads the handler's annotations in this module's namespace
from restate import RunOptions

from crashlab.bench.workloads import pai
from crashlab.bench.workloads import restate as bare
from crashlab.bench.workloads.base import Workload

PRELOAD = pai.PRELOAD
STEP = RunOptions(max_attempts=None, initial_retry_interval=timedelta(milliseconds=100),
                  max_retry_interval=timedelta(milliseconds=500))  # the retries of the bare row's invocation


class PydanticAIRestate(bare.Restate):
    def app(self, service: str):
        from restate.ext.pydantic import RestateAgent

        agent = RestateAgent(pai.build_agent(), auto_wrap_tools=True, run_options=STEP)
        bench = bare.bench_service(service)

        @bench.handler()
        async def run(ctx: restate.Context, n: int) -> int:
            result = await agent.run(pai.prompt(n))
            return pai.steps_done(result.output)

        return restate.app(services=[bench])


def make(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return bare.make(variant, workdir, recovery, kind=PydanticAIRestate)


def unavailable(variant: str) -> str | None:
    return pai.unavailable() or bare.missing("restate.ext.pydantic") or bare.unavailable(variant)


def note(variant: str) -> list[str]:
    return ["each step is two journal entries, the model request and the tool call (auto_wrap_tools=True)"]


def recovery_note(variant: str) -> list[str]:
    return bare.recovery_note(variant)
