"""The engines' workloads, run inside each engine's own child process: the trivial step every engine runs
(``_step_body``, which counts itself and, in the process about to be killed, blocks at the chosen step),
one ``_Workload`` per engine (the fsync floor, LangGraph on SqliteSaver, DBOS on SQLite or PostgreSQL,
Temporal with an in-process worker; Restate's is in :mod:`crashlab.bench.restate_workload`), ``_workload`` that picks one from the engine's name and the
environment, and ``_measure``, the per-step measurement: a warm-up, then N-step runs against 1-step ones."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, TypedDict

from crashlab.bench.common import ENV_DB_URL, ENV_TEMPORAL, TEMPORAL_RECOVERY_TIMEOUT_S, BenchError, reached_block_point

APP_VERSION = "crashlab-bench-1"          # pinned: the recovering DBOS process must match the killed one

_executed = 0  # steps run in this process (the recovery scene reports it)


def _step_body(i: int) -> int:
    """What every engine's step does (Temporal's activity too, in :mod:`crashlab.bench.temporal_workflow`): count
    itself, and, in the process that is about to be killed, stop dead at the chosen step."""
    global _executed
    _executed += 1
    while reached_block_point(i):  # wait for the SIGKILL
        time.sleep(3600)
    return i + 1


class _Workload:
    """One engine, set up in this process: ``run(n)`` runs a fresh n-step workflow to its end."""

    def run(self, n: int) -> None:
        raise NotImplementedError

    def start_recoverable(self, n: int, wid: str) -> None:
        """Run an n-step workflow under a fixed id (the recovery scene's first process, which dies in it)."""
        raise NotImplementedError

    def resume(self, n: int, wid: str) -> Any:
        """Finish the workflow ``wid`` that a killed process left behind; return its result."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Floor(_Workload):
    def __init__(self, workdir: Path):
        self.path = workdir / "floor.jsonl"

    def run(self, n: int) -> None:
        with open(self.path, "a") as f:
            for i in range(n):
                f.write(json.dumps({"step": i, "result": i + 1}) + "\n")
                f.flush()
                os.fsync(f.fileno())


class _BenchState(TypedDict):
    i: int  # steps done
    n: int  # steps wanted


class _LangGraph(_Workload):
    def __init__(self, workdir: Path, durability: str):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph

        def step(state):
            return {"i": _step_body(state["i"])}

        def route(state):
            return "step" if state["i"] < state["n"] else END

        builder = StateGraph(_BenchState)
        builder.add_node("step", step)
        builder.add_edge(START, "step")
        builder.add_conditional_edges("step", route, ["step", END])
        self.conn = sqlite3.connect(str(workdir / f"langgraph-{durability}.sqlite"), check_same_thread=False)
        self.graph = builder.compile(checkpointer=SqliteSaver(self.conn))
        self.durability = durability
        self.ids = itertools.count()

    def _config(self, thread: str, n: int) -> dict:
        return {"configurable": {"thread_id": thread}, "recursion_limit": n + 10}

    def run(self, n: int) -> None:
        out = self.graph.invoke({"i": 0, "n": n}, self._config(f"bench-{next(self.ids)}", n),
                                durability=self.durability)
        if out["i"] != n:
            raise BenchError(f"the graph stopped at {out['i']} of {n} steps")

    def start_recoverable(self, n: int, wid: str) -> None:
        self.graph.invoke({"i": 0, "n": n}, self._config(wid, n), durability=self.durability)

    def resume(self, n: int, wid: str) -> Any:
        config = self._config(wid, n)
        snapshot = self.graph.get_state(config)
        if snapshot.metadata is None:  # no checkpoint was saved before the kill: all there is, is to start over
            out = self.graph.invoke({"i": 0, "n": n}, config, durability=self.durability)
        else:  # resume from the last checkpoint (and the writes saved with it), at the start of the next node
            out = self.graph.invoke(None, config, durability=self.durability)
        return out["i"]

    def close(self) -> None:
        self.conn.close()


class _Dbos(_Workload):
    def __init__(self, workdir: Path, url: str | None):
        from dbos import DBOS

        url = url or f"sqlite:///{workdir / 'dbos.sqlite'}"

        @DBOS.step()
        def bench_step(i: int) -> int:
            return _step_body(i)

        @DBOS.workflow()
        def bench_workflow(n: int) -> int:
            i = 0
            for _ in range(n):
                i = bench_step(i)
            return i

        DBOS(config={"name": "crashlab-bench", "system_database_url": url, "application_version": APP_VERSION,
                     "log_level": "WARNING", "notification_listener_polling_interval_sec": 0.05})
        self.DBOS = DBOS
        self.workflow = bench_workflow

    def launch(self) -> None:
        self.DBOS.launch()  # in a recovering process, this is what picks up the PENDING workflow

    def run(self, n: int) -> None:
        out = self.workflow(n)
        if out != n:
            raise BenchError(f"the workflow returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        from dbos import SetWorkflowID

        with SetWorkflowID(wid):
            self.DBOS.start_workflow(self.workflow, n).get_result(polling_interval_sec=0.05)

    def resume(self, n: int, wid: str) -> Any:
        return self.DBOS.retrieve_workflow(wid).get_result(polling_interval_sec=0.05)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.DBOS.destroy()


class _Temporal(_Workload):
    """A client and an in-process worker on one event loop; ``run`` drives the loop per workflow."""

    def __init__(self, address: str, task_queue: str, cache: bool = True,
                 start_to_close_s: float = 10, sticky_s: float | None = None):
        import asyncio

        from temporalio.client import Client
        from temporalio.worker import Worker

        from crashlab.bench import temporal_workflow as bench_temporal

        with contextlib.suppress(Exception):
            from crashlab.engines.temporal import use_quiet_runtime

            use_quiet_runtime()
        self.bt = bench_temporal
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(asyncio.wait_for(Client.connect(address), 20))
        async def make_worker() -> Worker:  # a Worker is built inside its event loop
            return Worker(self.client, task_queue=task_queue, workflows=[bench_temporal.BenchWorkflow],
                          activities=[bench_temporal.bench_step], **bench_temporal.worker_options(cache, sticky_s))

        self.worker = self.loop.run_until_complete(make_worker())
        self.worker_task = self.loop.create_task(self.worker.run())
        self.task_queue = task_queue
        self.start_to_close_s = start_to_close_s
        self.ids = itertools.count()
        self.prefix = f"bench-{os.getpid()}-{time.time_ns()}"

    def _execute(self, n: int, wid: str) -> int:
        return self.loop.run_until_complete(self.client.execute_workflow(
            self.bt.BenchWorkflow.run, {"steps": n, "start_to_close_s": self.start_to_close_s}, id=wid,
            task_queue=self.task_queue))

    def run(self, n: int) -> None:
        out = self._execute(n, f"{self.prefix}-{next(self.ids)}")
        if out != n:
            raise BenchError(f"the workflow returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        self._execute(n, wid)

    def resume(self, n: int, wid: str) -> Any:
        return self.loop.run_until_complete(self.client.get_workflow_handle(wid).result())

    @property
    def executed(self) -> int:
        return self.bt.executed

    def close(self) -> None:
        import asyncio

        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.wait_for(self.worker.shutdown(), 5))


def _workload(engine: str, workdir: Path, recovery: bool = False) -> _Workload:
    if engine == "floor":
        return _Floor(workdir)
    if engine.startswith("langgraph-"):
        return _LangGraph(workdir, engine.split("-", 1)[1])
    if engine.startswith("dbos-"):
        return _Dbos(workdir, os.environ.get(ENV_DB_URL) if engine == "dbos-postgres" else None)
    if engine == "temporal":
        address = os.environ.get(ENV_TEMPORAL)
        if not address:
            raise BenchError(f"{ENV_TEMPORAL} is not set: run the whole benchmark (it starts a dev server) or set it "
                             "to the address of one")
        if recovery:  # a 1 s sticky timeout and a short activity timeout: what lesson 5 tunes for a quick recovery
            return _Temporal(address, "bench-recovery", sticky_s=1, start_to_close_s=TEMPORAL_RECOVERY_TIMEOUT_S)
        return _Temporal(address, f"bench-{os.getpid()}")
    if engine == "restate":
        from crashlab.bench.restate_workload import _Restate  # imports this module: not at the top

        return _Restate(workdir, recovery=recovery)
    raise BenchError(f"unknown engine {engine!r}")


def _measure(engine: str, workdir: Path, steps: int, repeats: int) -> dict:
    """The per-step measurement, run inside the engine's own process."""
    workload = _workload(engine, workdir)
    try:
        if isinstance(workload, _Dbos):
            workload.launch()
        workload.run(min(steps, 5))  # warm-up: schema creation, first-call costs
        samples, one, full = [], [], []
        def timed(n: int) -> float:
            t0 = time.perf_counter()
            workload.run(n)
            return time.perf_counter() - t0

        for k in range(repeats):
            # the 1-step baseline is short and so the noisiest part: take the median of three around the long run
            base = [timed(1)]
            if k % 2 == 0:
                base.append(timed(1))
            t_full = timed(steps)
            base.append(timed(1))
            if k % 2 == 1:
                base.append(timed(1))
            t_one = statistics.median(base)
            one.append(t_one)
            full.append(t_full)
            samples.append((t_full - t_one) / (steps - 1) * 1000)
        return {"engine": engine, "samples_ms": samples, "one_s": one, "full_s": full}
    finally:
        workload.close()
