"""DBOS in the benchmark: a workflow of N steps on SQLite (``dbos-sqlite``) or on a throwaway PostgreSQL
(``dbos-postgres``, whose URL the caller passes in the environment)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from crashlab.bench.common import ENV_DB_URL, BenchError
from crashlab.bench.workloads.base import Workload, step_body

APP_VERSION = "crashlab-bench-1"          # pinned: the recovering DBOS process must match the killed one


class Dbos(Workload):
    """DBOS in this process; the workflow is :meth:`define`'s (a framework integration's row swaps in its own)."""

    def __init__(self, workdir: Path, url: str | None):
        from dbos import DBOS

        url = url or f"sqlite:///{workdir / 'dbos.sqlite'}"
        self.workflow = self.define()  # before DBOS() is configured, as DBOS wants its functions registered
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
            self.DBOS.start_workflow(self.workflow, n).get_result(polling_interval_sec=0.05)

    def resume(self, n: int, wid: str) -> Any:
        return self.DBOS.retrieve_workflow(wid).get_result(polling_interval_sec=0.05)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.DBOS.destroy()


def make(variant: str, workdir: Path, recovery: bool = False, kind: type[Dbos] = Dbos) -> Workload:
    return kind(workdir, os.environ.get(ENV_DB_URL) if variant == "dbos-postgres" else None)


def bench_env(variant: str, servers) -> dict[str, str]:
    """A fresh database on the run's one throwaway PostgreSQL cluster, for ``dbos-postgres``."""
    if variant != "dbos-postgres":
        return {}
    from crashlab.engines.postgres import fresh_database, throwaway_postgres

    url = servers.shared("postgres", lambda: servers.stack.enter_context(throwaway_postgres(servers.workdir / "pg")))
    return {ENV_DB_URL: fresh_database(url, "bench")}


def unavailable(variant: str) -> str | None:
    from crashlab.bench.workloads.base import missing

    why = missing("dbos")
    if why or variant != "dbos-postgres":
        return why
    from crashlab.bench import postgres_available  # the package's, which a test can replace

    ok, reason = postgres_available()
    return None if ok else f"skipped: {reason}"


def note(variant: str) -> list[str]:
    return ["throwaway cluster runs with fsync=off"] if variant == "dbos-postgres" else []


def recovery_note(variant: str) -> list[str]:
    return ["launch() re-enqueues it on an internal queue polled every 1 s"]
