"""LangGraph in the benchmark: a one-node graph looping N times on the SQLite checkpointer, at each of its
durability modes (``exit``, ``async``, ``sync``: the benchmark's rows ``langgraph-exit`` and so on)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, TypedDict

from crashlab.bench.common import BenchError
from crashlab.bench.workloads.base import Workload, step_body


class BenchState(TypedDict):
    i: int  # steps done
    n: int  # steps wanted


class LangGraph(Workload):
    def __init__(self, workdir: Path, durability: str):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph

        def step(state):
            return {"i": step_body(state["i"])}

        def route(state):
            return "step" if state["i"] < state["n"] else END

        builder = StateGraph(BenchState)
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


def make(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return LangGraph(workdir, variant.split("-", 1)[1])


def unavailable(variant: str) -> str | None:
    from crashlab.bench.workloads.base import missing

    return missing("langgraph", "langgraph.checkpoint.sqlite")


def note(variant: str) -> list[str]:
    return ["checkpoints only when the graph exits, so no step is durable on its own"] if variant == "langgraph-exit" \
        else []


def recovery_note(variant: str) -> list[str]:
    return []
