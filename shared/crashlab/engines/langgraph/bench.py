"""LangGraph in the benchmark: a one-node graph looping N times on the SQLite checkpointer, at each of its
durability modes (``exit``, ``async``, ``sync``: the benchmark's rows ``langgraph-exit`` and so on); and its
functional API (``langgraph-functional``): an ``@entrypoint`` on the SQLite checkpointer that calls one trivial
``@task`` N times, each result saved as the task's write, invoked with ``durability="sync"`` -- beside the graph row
of the same mode (``langgraph-sync``). A recovering process invokes the entrypoint again with ``None`` on the same
thread: tasks whose results were saved are read back, not run."""

from __future__ import annotations

import itertools
import operator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, cast, get_args

from crashlab.engines.langgraph.record import CheckpointReader
from crashlab.engines.record import Entry, Record, Store
from crashlab.engines.workload import BenchError, Workload, Workloads, long_step, missing, step_body

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

Durability = Literal["exit", "async", "sync"]  # LangGraph's durability modes, a row each
MODES: dict[str, Durability] = {f"langgraph-{mode}": mode for mode in get_args(Durability)}

FUNCTIONAL_DURABILITY: Durability = "sync"


class BenchState(TypedDict):
    i: int  # steps done
    n: int  # steps wanted


class LongState(BenchState):
    """The long agent's state: its conversation a list channel that each turn appends to, as an agent's ``messages``
    with ``add_messages``; the checkpointer stores the channel's whole value after every step."""

    conversation: Annotated[list[str], operator.add]
    result_bytes: int


class LangGraph(Workload):
    def __init__(self, workdir: Path, durability: Durability):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph

        def step(state):
            return {"i": step_body(state["i"])}

        def route(state):
            return "step" if state["i"] < state["n"] else END

        def turn(state):
            said = long_step(state["i"], state["conversation"], state["result_bytes"])
            return {"i": state["i"] + 1, "conversation": [said]}

        self.path = workdir / f"langgraph-{durability}.sqlite"
        self.conn = sqlite3.connect(str(self.path), check_same_thread=False)
        graphs = []
        for state_type, node in ((BenchState, step), (LongState, turn)):
            builder = StateGraph(state_type)
            builder.add_node("step", node)
            builder.add_edge(START, "step")
            builder.add_conditional_edges("step", route, ["step", END])
            graphs.append(builder.compile(checkpointer=SqliteSaver(self.conn)))
        self.bare_graph, self.long_graph = graphs
        self.durability = durability
        self.ids = itertools.count()

    @property
    def graph(self) -> Any:
        return self.long_graph if self.result_bytes else self.bare_graph

    def _input(self, n: int) -> dict:
        return {"i": 0, "n": n, **({"conversation": [], "result_bytes": self.result_bytes} if self.result_bytes else {})}

    def _config(self, thread: str, n: int) -> RunnableConfig:
        return {"configurable": {"thread_id": thread}, "recursion_limit": n + 10}

    def run(self, n: int) -> None:
        out = self.graph.invoke({"i": 0, "n": n}, self._config(f"bench-{next(self.ids)}", n),
                                durability=self.durability)
        if out["i"] != n:
            raise BenchError(f"the graph stopped at {out['i']} of {n} steps")

    def start_recoverable(self, n: int, wid: str) -> None:
        self.graph.invoke(self._input(n), self._config(wid, n), durability=self.durability)

    def resume(self, n: int, wid: str) -> Any:
        config = self._config(wid, n)
        snapshot = self.graph.get_state(config)
        if snapshot.metadata is None:  # no checkpoint was saved before the kill: all there is, is to start over
            out = self.graph.invoke(self._input(n), config, durability=self.durability)
        else:  # resume from the last checkpoint (and the writes saved with it), at the start of the next node
            out = self.graph.invoke(None, config, durability=self.durability)
        return out["i"]

    def record(self, wid: str) -> Record:
        return CheckpointReader().read(Store(self.path.parent, str(self.path)), wid)

    def ends_turn(self, entry: Entry) -> bool:
        return entry.kind == "checkpoint" and (entry.turn or 0) >= 1  # the state saved after a run of the node

    def close(self) -> None:
        self.conn.close()


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
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        return cast(int, self.bench.invoke(n, config, durability=FUNCTIONAL_DURABILITY))  # what bench() returns

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


class LangGraphWorkloads(Workloads):
    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        return LangGraph(workdir, MODES[variant])

    def unavailable(self, variant: str) -> str | None:
        return missing("langgraph", "langgraph.checkpoint.sqlite")

    def note(self, variant: str) -> list[str]:
        return ["checkpoints only when the graph exits, so no step is durable on its own"] \
            if variant == "langgraph-exit" else []


class FunctionalWorkloads(Workloads):
    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        return LangGraphFunctional(workdir)

    def unavailable(self, variant: str) -> str | None:
        return missing("langgraph.func", "langgraph.checkpoint.sqlite")

    def note(self, variant: str) -> list[str]:
        return [f"one @task per step, durability {FUNCTIONAL_DURABILITY!r}"]


__all__ = ["FUNCTIONAL_DURABILITY", "FunctionalWorkloads", "LangGraph", "LangGraphFunctional", "LangGraphWorkloads"]
