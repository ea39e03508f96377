"""Temporal in the benchmark: a workflow of N activities (:mod:`.bench_workflow`) with a client and an in-process
worker, on the dev server whose address the caller passes in the environment; and Pydantic AI on Temporal
(``temporal+pydantic-ai``): the same client and worker running :mod:`.bench_pai_workflow` with Pydantic AI's
plugin on the client (its data converter, its sandbox pass-throughs, and the agent's activities registered on
the worker), each step two activities: the model request and the tool call."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path
from typing import Any

from crashlab.engines import pai_bench
from crashlab.engines.record import Entry, Record
from crashlab.engines.temporal.client import ENV_TEMPORAL_ADDRESS
from crashlab.engines.temporal.record import HistoryReader
from crashlab.engines.workload import BenchError, Workload, Workloads, missing

class Temporal(Workload):
    """A client and an in-process worker on one event loop; ``run`` drives the loop per workflow. What the worker
    runs is :meth:`parts`' (a framework integration's row swaps in its own workflow)."""

    def __init__(self, address: str, task_queue: str, cache: bool = True,
                 start_to_close_s: float = 10, sticky_s: float | None = None):
        import asyncio

        from temporalio.client import Client
        from temporalio.worker import Worker

        from crashlab.engines.temporal import bench_workflow

        self.workflow, activities, plugins = self.parts()
        with contextlib.suppress(Exception):
            from crashlab.engines.temporal.client import use_quiet_runtime

            use_quiet_runtime()
        self.bt = bench_workflow
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(asyncio.wait_for(Client.connect(address, plugins=plugins), 20))
        async def make_worker() -> Worker:  # a Worker is built inside its event loop
            return Worker(self.client, task_queue=task_queue, workflows=[self.workflow, *self.long_workflows()],
                          activities=activities,
                          **bench_workflow.worker_options(cache, sticky_s))

        self.worker = self.loop.run_until_complete(make_worker())
        self.worker_task = self.loop.create_task(self.worker.run())
        self.task_queue = task_queue
        self.start_to_close_s = start_to_close_s
        self.ids = itertools.count()
        self.prefix = f"bench-{os.getpid()}-{time.time_ns()}"

    def parts(self) -> tuple[Any, list, list]:
        """The workflow class, the activities and the client plugins: the bare engine's N activities."""
        from crashlab.engines.temporal import bench_workflow

        return bench_workflow.BenchWorkflow, [bench_workflow.bench_step, bench_workflow.bench_long_step], []

    def long_workflows(self) -> list:
        """The long agent's workflow, which the worker runs beside :meth:`parts`' (none on an integration's row)."""
        from crashlab.engines.temporal import bench_workflow

        return [bench_workflow.BenchLongWorkflow]

    def _execute(self, n: int, wid: str) -> int:
        return self.loop.run_until_complete(self.client.execute_workflow(
            self.workflow.run, {"steps": n, "start_to_close_s": self.start_to_close_s}, id=wid,
            task_queue=self.task_queue))

    def run(self, n: int) -> None:
        out = self._execute(n, f"{self.prefix}-{next(self.ids)}")
        if out != n:
            raise BenchError(f"the workflow returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        if not self.result_bytes:
            self._execute(n, wid)
            return
        self.loop.run_until_complete(self.client.execute_workflow(
            self.bt.BenchLongWorkflow.run, {"steps": n, "start_to_close_s": self.start_to_close_s,
                                            "result_bytes": self.result_bytes}, id=wid, task_queue=self.task_queue))

    def resume(self, n: int, wid: str) -> Any:
        return self.loop.run_until_complete(self.client.get_workflow_handle(wid).result())

    def record(self, wid: str) -> Record:
        async def events() -> list[Any]:
            return [e async for e in self.client.get_workflow_handle(wid).fetch_history_events()]

        return Record("temporal", wid, tuple(HistoryReader().entries(self.loop.run_until_complete(events()))))

    def ends_turn(self, entry: Entry) -> bool:
        return entry.kind == "ActivityTaskCompleted"

    @property
    def executed(self) -> int:
        return self.bt.executed

    def close(self) -> None:
        import asyncio

        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.wait_for(self.worker.shutdown(), 5))


class PydanticAITemporal(Temporal):
    def parts(self) -> tuple[Any, list, list]:
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

        from crashlab.engines.temporal.bench_pai_workflow import PydanticAIBenchWorkflow

        return PydanticAIBenchWorkflow, [], [PydanticAIPlugin()]

    def long_workflows(self) -> list:
        return []

    @property
    def executed(self) -> int:
        return Workload.executed.fget(self)  # type: ignore[attr-defined]  # the tool's step_body counts itself


class TemporalWorkloads(Workloads):
    # What the child imports before its clock starts, besides the engine's own modules: the workflow's module.
    preload: tuple[str, ...] = ("crashlab.engines.temporal.bench_workflow",)
    kind: type[Temporal] = Temporal

    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        address = os.environ.get(ENV_TEMPORAL_ADDRESS)
        if not address:
            raise BenchError(f"{ENV_TEMPORAL_ADDRESS} is not set: run the whole benchmark (it starts a dev server) or "
                             "set it to the address of one")
        if recovery:  # a 1 s sticky timeout and a short activity timeout: what lesson 5 tunes for a quick recovery
            from crashlab.engines.temporal.bench_workflow import RECOVERY_TIMEOUT_S

            return self.kind(address, f"bench-recovery-{variant}", sticky_s=1, start_to_close_s=RECOVERY_TIMEOUT_S)
        return self.kind(address, f"bench-{os.getpid()}")

    def unavailable(self, variant: str) -> str | None:
        why = missing("temporalio")
        if why:
            return why
        from crashlab.engines.temporal.server import temporal_binary

        try:
            temporal_binary()
        except Exception as exc:  # noqa: BLE001 -- the binary is missing: say so in the row
            return f"skipped: {exc}"
        return None

    def recovery_note(self, variant: str) -> list[str]:
        from crashlab.engines.temporal.bench_workflow import RECOVERY_TIMEOUT_S

        return [f"recovery waits out a {RECOVERY_TIMEOUT_S} s start-to-close timeout and the dead worker's 1 s "
                "sticky queue, then replays the history once"]


class PydanticAITemporalWorkloads(TemporalWorkloads):
    preload = (*TemporalWorkloads.preload, *pai_bench.PRELOAD, "crashlab.engines.temporal.bench_pai_workflow")
    kind = PydanticAITemporal

    def unavailable(self, variant: str) -> str | None:
        return pai_bench.unavailable() or super().unavailable(variant)

    def note(self, variant: str) -> list[str]:
        return ["each step is two activities, the model request and the tool call"]


__all__ = ["PydanticAITemporal", "PydanticAITemporalWorkloads", "Temporal", "TemporalWorkloads"]
