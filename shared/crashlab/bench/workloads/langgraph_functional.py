"""LangGraph's functional API in the benchmark (``langgraph-functional``): an ``@entrypoint`` on the SQLite
checkpointer that calls one trivial ``@task`` N times, each result saved as the task's write, invoked with
``durability="sync"`` -- beside the graph row of the same mode (``langgraph-sync``). A recovering process invokes
the entrypoint again with ``None`` on the same thread: tasks whose results were saved are read back, not run."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from crashlab.bench.common import BenchError
from crashlab.bench.workloads.base import Workload, missing, step_body

DURABILITY = "sync"


class LangGraphFunctional(Workload):
    def __init__(self, workdir: Path):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.func import entrypoint, task

        @task
        def step(i: int) -> int:
            return step_body(i)

        self.conn = sqlite3.connect(str(workdir / "langgraph-functional.sqlite"), check_same_thread=False)

        @entrypoint(checkpointer=SqliteSaver(self.conn))
        def bench(n: int) -> int:
            i = 0
            for _ in range(n):
                i = step(i).result()
            return i

        self.bench = bench
        self.ids = itertools.count()

    def _invoke(self, n: int | None, thread: str) -> int:
        return self.bench.invoke(n, {"configurable": {"thread_id": thread}}, durability=DURABILITY)

    def run(self, n: int) -> None:
        out = self._invoke(n, f"bench-{next(self.ids)}")
        if out != n:
            raise BenchError(f"the entrypoint returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        self._invoke(n, wid)

    def resume(self, n: int, wid: str) -> Any:
        snapshot = self.bench.get_state({"configurable": {"thread_id": wid}})
        return self._invoke(n if snapshot.created_at is None else None, wid)  # nothing saved: start over

    def close(self) -> None:
        self.conn.close()


def make(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return LangGraphFunctional(workdir)


def unavailable(variant: str) -> str | None:
    return missing("langgraph.func", "langgraph.checkpoint.sqlite")


def note(variant: str) -> list[str]:
    return [f"one @task per step, durability {DURABILITY!r}"]


def recovery_note(variant: str) -> list[str]:
    return []
