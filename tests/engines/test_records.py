"""Each engine's record of an order, read from the engine's own store: its entries in order, with their kind, name,
stored size and step. LangGraph and DBOS are read from stores they really wrote (a small graph, a small workflow);
Temporal's history and Restate's journal from what their clients hand back (their servers are in the lessons'
tests, where the lessons read them through these same readers)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from crashlab.engines import registry
from crashlab.engines.dbos.record import dbos_steps
from crashlab.engines.langgraph.record import checkpoint_writes
from crashlab.engines.record import Store

GRAPH = textwrap.dedent("""
    import sqlite3, sys
    from typing import TypedDict
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.func import entrypoint, task
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        i: int

    def step(state):
        return {"i": state["i"] + 1}

    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: "step" if s["i"] < 3 else END, ["step", END])
    conn = sqlite3.connect(sys.argv[1] + "/checkpoints.sqlite", check_same_thread=False)
    builder.compile(checkpointer=SqliteSaver(conn)).invoke({"i": 0}, {"configurable": {"thread_id": "ORD-1"}},
                                                            durability="sync")

    @task
    def charge(i: int) -> int:
        return i + 1

    @entrypoint(checkpointer=SqliteSaver(conn))
    def order(n: int) -> int:
        return [charge(i).result() for i in range(n)][-1]

    order.invoke(3, {"configurable": {"thread_id": "ORD-2"}}, durability="sync")
""")

WORKFLOW = textwrap.dedent("""
    import sys
    from dbos import DBOS, SetWorkflowID

    DBOS(config={"name": "records-test", "system_database_url": f"sqlite:///{sys.argv[1]}/dbos.sqlite",
                 "log_level": "WARNING"})

    @DBOS.step()
    def charge_card(i: int) -> dict:
        return {"id": f"ch_{i}", "amount": 49.99, "note": "x" * 100 * i}

    @DBOS.workflow()
    def order(n: int) -> int:
        for i in range(n):
            charge_card(i)
        return n

    DBOS.launch()
    with SetWorkflowID("ORD-1"):
        order(3)
    DBOS.destroy()
""")


def _run(script: str, folder) -> None:
    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_langgraphs_record_is_each_checkpoint_then_the_writes_made_from_it(tmp_path):
    _run(GRAPH, tmp_path)
    graph = registry.read_record("langgraph", tmp_path, "ORD-1")
    kinds = [(e.kind, e.turn) for e in graph]
    assert kinds[0] == ("checkpoint", -1) and ("write", 0) in kinds and kinds[-1] == ("checkpoint", 3)
    assert [e.turn for e in graph if e.kind == "checkpoint"] == [-1, 0, 1, 2, 3]
    assert all(e.size > 0 for e in graph if e.kind == "checkpoint") and graph.size == sum(e.size for e in graph)
    functional = registry.read_record("langgraph", tmp_path, "ORD-2")
    assert functional.names("write").count("__return__") == 3  # one per finished task
    assert checkpoint_writes(tmp_path, thread_id="ORD-2") == functional.names("write")
    assert len(registry.read_record("langgraph", tmp_path, "ORD-9")) == 0  # no thread: nothing recorded


def test_dbos_record_is_the_input_each_step_by_its_number_and_the_output(tmp_path):
    _run(WORKFLOW, tmp_path)
    record = registry.read_record("dbos", tmp_path, "ORD-1")
    assert [(e.kind, e.name, e.turn) for e in record] == [
        ("input", "", None), ("step", "charge_card", 1), ("step", "charge_card", 2), ("step", "charge_card", 3),
        ("output", "", None)]
    sizes = [e.size for e in record if e.kind == "step"]
    assert sizes[0] < sizes[1] < sizes[2]  # the bytes of each output as stored: the longer the note, the more
    assert dbos_steps(tmp_path, "ORD-1") == ["charge_card"] * 3
    assert len(registry.read_record("dbos", tmp_path / "nowhere", "ORD-1")) == 0


def test_temporals_record_is_the_history_each_activity_event_named_after_its_activity(monkeypatch, tmp_path):
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.history.v1 import HistoryEvent

    from crashlab.engines.temporal import record as temporal_record

    started = HistoryEvent(event_id=1, event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
    scheduled = HistoryEvent(event_id=5, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    scheduled.activity_task_scheduled_event_attributes.activity_type.name = "charge_card"
    completed = HistoryEvent(event_id=7, event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    completed.activity_task_completed_event_attributes.scheduled_event_id = 5
    seen = []
    monkeypatch.setattr(temporal_record, "history", lambda store, order_id: seen.append((store, order_id)) or
                        [started, scheduled, completed])
    record = registry.read_record("temporal", tmp_path, "ORD-1", server="127.0.0.1:7233")
    assert seen == [(Store(tmp_path, None, "127.0.0.1:7233"), "ORD-1")]
    assert [(e.kind, e.name) for e in record] == [("WorkflowExecutionStarted", ""),
                                                 ("ActivityTaskScheduled", "charge_card"),
                                                 ("ActivityTaskCompleted", "charge_card")]
    assert [e.size for e in record] == [started.ByteSize(), scheduled.ByteSize(), completed.ByteSize()]


def test_restates_record_is_the_journal_of_each_invocation_of_the_order_oldest_first(monkeypatch, tmp_path):
    from crashlab.engines.restate import record as restate_record

    journals = {"inv_1": [{"index": 0, "entry_type": "Command: Input", "name": None, "raw_length": 120},
                          {"index": 1, "entry_type": "Command: Run", "name": "charge_card", "raw_length": 30}],
                "inv_2": [{"index": 0, "entry_type": "Command: Input", "name": "", "raw_length": 120}]}
    monkeypatch.setattr(restate_record, "order_invocations", lambda admin, world, order_id: [{"id": "inv_1"},
                                                                                            {"id": "inv_2"}])
    monkeypatch.setattr(restate_record, "journal", lambda admin, invocation: journals[invocation])
    record = registry.read_record("restate", tmp_path, "ORD-1", server="http://127.0.0.1:9070")
    assert [(e.kind, e.name, e.size) for e in record] == [("Command: Input", "", 120), ("Command: Run", "charge_card", 30),
                                                         ("Command: Input", "", 120)]
    assert record.names("Command: Run") == ["charge_card"] and record.size == 270
