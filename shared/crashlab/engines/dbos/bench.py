"""DBOS in the benchmark: a workflow of N steps on SQLite (``dbos-sqlite``) or on a throwaway PostgreSQL
(``dbos-postgres``, whose URL the caller passes in the environment); and Pydantic AI on DBOS (``dbos+pydantic-ai``):
the bare row's set-up on SQLite, running the benchmark's agent (:mod:`crashlab.engines.pai_bench`) with
``DBOSDurability`` inside our own async ``@DBOS.workflow``. The capability makes each model request a step; it
leaves function tools alone, so the tool's work goes through ``@DBOS.step`` too, as an agent that wants its tool
calls recorded must do. Each of its steps is then two DBOS steps: the model request and the tool call."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from crashlab.engines import pai_bench, postgres
from crashlab.engines.dbos.record import SystemDatabaseReader
from crashlab.engines.record import Entry, Record, Store
from crashlab.engines.workload import BenchError, SharedServers, Workload, Workloads, long_step, missing, step_body

APP_VERSION = "crashlab-bench-1"          # pinned: the recovering DBOS process must match the killed one
ENV_DB_URL = "CRASHLAB_BENCH_DB_URL"      # the dbos-postgres row's database, on the run's throwaway cluster


class Dbos(Workload):
    """DBOS in this process; the workflow is :meth:`define`'s (a framework integration's row swaps in its own)."""

    def __init__(self, workdir: Path, url: str | None):
        from dbos import DBOS

        url = url or f"sqlite:///{workdir / 'dbos.sqlite'}"
        self.url = url
        self.workflow = self.define()  # before DBOS() is configured, as DBOS wants its functions registered
        self.long_workflow = self.define_long()
        DBOS(config={"name": "crashlab-bench", "system_database_url": url, "application_version": APP_VERSION,
                     "log_level": "WARNING", "notification_listener_polling_interval_sec": 0.05})
        self.DBOS = DBOS

    def define(self):
        """The workflow: N trivial steps."""
        from dbos import DBOS

        @DBOS.step()
        def bench_step(i: int) -> int:
            return step_body(i)

        @DBOS.workflow()
        def bench_workflow(n: int) -> int:
            i = 0
            for _ in range(n):
                i = bench_step(i)
            return i

        return bench_workflow

    def define_long(self):
        """The long agent: n turns, each a step handed the conversation so far; DBOS records each step's output."""
        from dbos import DBOS

        @DBOS.step()
        def bench_long_step(i: int, conversation: list[str], result_bytes: int) -> str:
            return long_step(i, conversation, result_bytes)

        @DBOS.workflow()
        def bench_long_workflow(n: int, result_bytes: int) -> int:
            conversation: list[str] = []
            for i in range(n):
                conversation.append(bench_long_step(i, conversation, result_bytes))
            return len(conversation)

        return bench_long_workflow

    def call(self, n: int) -> int:
        """Run the workflow to its end in this thread."""
        return self.workflow(n)

    def launch(self) -> None:
        self.DBOS.launch()  # in a recovering process, this is what picks up the PENDING workflow

    def run(self, n: int) -> None:
        out = self.call(n)
        if out != n:
            raise BenchError(f"the workflow returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        from dbos import SetWorkflowID

        with SetWorkflowID(wid):
            if self.result_bytes:
                self.DBOS.start_workflow(self.long_workflow, n, self.result_bytes).get_result(polling_interval_sec=0.05)
            else:
                self.DBOS.start_workflow(self.workflow, n).get_result(polling_interval_sec=0.05)

    def resume(self, n: int, wid: str) -> Any:
        return self.DBOS.retrieve_workflow(wid).get_result(polling_interval_sec=0.05)

    def record(self, wid: str) -> Record:
        return SystemDatabaseReader().read(Store(Path("."), self.url), wid)

    def ends_turn(self, entry: Entry) -> bool:
        return entry.kind == "step"

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.DBOS.destroy()


class PydanticAIDbos(Dbos):
    def define(self):
        from dbos import DBOS
        from pydantic_ai.durable_exec.dbos import DBOSDurability

        agent = pai_bench.build_agent(capabilities=[DBOSDurability()],
                                      tool_step=DBOS.step(name=f"{pai_bench.AGENT_NAME}__step"))

        @DBOS.workflow()
        async def pydantic_ai_bench_workflow(n: int) -> int:
            result = await agent.run(pai_bench.prompt(n))
            return pai_bench.steps_done(result.output)

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


class DbosWorkloads(Workloads):
    env = (ENV_DB_URL,)
    kind: type[Dbos] = Dbos

    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        return self.kind(workdir, os.environ.get(ENV_DB_URL) if variant == "dbos-postgres" else None)

    def servers_env(self, variant: str, servers: SharedServers) -> dict[str, str]:
        """A fresh database on the run's one throwaway PostgreSQL cluster, for ``dbos-postgres``."""
        if variant != "dbos-postgres":
            return {}
        url = servers.shared("postgres", lambda: servers.stack.enter_context(
            postgres.throwaway_postgres(servers.workdir / "pg")))
        return {ENV_DB_URL: postgres.fresh_database(url, "bench")}

    def unavailable(self, variant: str) -> str | None:
        why = missing("dbos")
        if why or variant != "dbos-postgres":
            return why
        ok, reason = postgres.postgres_available()  # through the module: a test can replace it
        return None if ok else f"skipped: {reason}"

    def note(self, variant: str) -> list[str]:
        return ["throwaway cluster runs with fsync=off"] if variant == "dbos-postgres" else []

    def recovery_note(self, variant: str) -> list[str]:
        return ["launch() re-enqueues it on an internal queue polled every 1 s"]


class PydanticAIDbosWorkloads(DbosWorkloads):
    preload = pai_bench.PRELOAD
    kind = PydanticAIDbos

    def unavailable(self, variant: str) -> str | None:
        return pai_bench.unavailable() or super().unavailable(variant)

    def note(self, variant: str) -> list[str]:
        return ["each step is two DBOS steps, the model request and the tool call (DBOSDurability makes only the "
                "model request a step; the tool is wrapped in @DBOS.step)"]


__all__ = ["APP_VERSION", "ENV_DB_URL", "Dbos", "DbosWorkloads", "PydanticAIDbos", "PydanticAIDbosWorkloads"]
