"""A fixture agent for the compensation lesson on LangGraph: lesson 3's reference agent (one side effect per
node, SQLite checkpoints written synchronously, a key from the thread id and the model turn on every effect),
plus a way back. When a step fails for good, its node records the failure in the state instead of a result,
and a conditional edge leaves the model out: it routes to the compensation nodes, which undo the steps that
succeeded in reverse order (release, refund), then send the cancellation -- one effect per node, each keyed
by the order and the step (``ORD-8842:undo:refund_charge``), so a crash in any of them resumes at that node
and the service replays the first answer instead of refunding twice. The code, not the model, decides to undo.

``langgraph_naive_compensating_agent.py`` runs the same graph with no keys on the compensations.
"""

import fcntl
import operator
import sqlite3
import time
from contextlib import contextmanager
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, AgentError, ToolCallFailed, WorldNotRunning, agent_main,
                            call_tool, content_to_dicts, first_tool_use, model_client, order_task, state_dir,
                            tool_result_message)
from crashlab.order import UNDO_TOOLS, order_details, undo_steps

TOOL_NAMES = [tool["name"] for tool in TOOLS]
DURABILITY = "sync"
UNDO_KEYED = True  # the naive variant sets this to False


def merge(old: dict, new: dict) -> dict:
    return {**old, **new}


class OrderState(TypedDict):
    messages: Annotated[list[dict], operator.add]  # the conversation, as plain dicts
    done: Annotated[dict, merge]                   # tool_use id -> the result of that call
    failed: dict | None                            # the step that failed for good: {"step", "error", "succeeded"}
    undone: Annotated[dict, merge]                 # compensation -> its result


# --- the do path: lesson 3's nodes ------------------------------------------------------------------------------
_client = None


def model_node(state: OrderState) -> dict:
    """Ask the model for the next step. One model call per node: a checkpoint follows each answer."""
    global _client
    _client = _client or model_client()
    reply = _client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=state["messages"])
    return {"messages": [{"role": "assistant", "content": content_to_dicts(reply.content)}]}


def pending_call(state: OrderState) -> dict | None:
    last = state["messages"][-1]
    return first_tool_use(last["content"]) if last["role"] == "assistant" else None


def turn(state: OrderState) -> int:
    return sum(1 for m in state["messages"] if m["role"] == "assistant")


def succeeded(state: OrderState) -> list[str]:
    """The do steps whose result the state holds, in the order they ran."""
    return [block["name"] for message in state["messages"] if message["role"] == "assistant"
            for block in message["content"] if block["type"] == "tool_use" and block["id"] in state["done"]]


def call_with_retry(name: str, args: dict, key: str | None, give_up_s: float = 90.0) -> dict:
    """call_tool, retried with backoff while the failure may pass (a 409, a 5xx, no answer) -- only a keyed call,
    whose key makes the next attempt safe. A permanent failure is raised at once: no retry will change it."""
    deadline, delay = time.monotonic() + give_up_s, 0.1
    while True:
        try:
            return call_tool(name, args, idempotency_key=key)
        except (ToolCallFailed, WorldNotRunning) as exc:
            passing = isinstance(exc, WorldNotRunning) or exc.retryable
            if key is None or not passing or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)


def tool_node(state: OrderState, config) -> dict:
    call = pending_call(state)
    if call["id"] in state["done"]:  # the checkpoint already holds this very call's result
        return {}
    key = f"{config['configurable']['thread_id']}/turn-{turn(state)}/{call['name']}"
    try:
        result = call_with_retry(call["name"], call["input"], key)
    except ToolCallFailed as exc:
        if not exc.permanent:
            raise
        # Recorded in the checkpoint like a result: a resume goes on with the undo, it never retries the step.
        return {"failed": {"step": call["name"], "error": str(exc), "succeeded": succeeded(state)}}
    return {"messages": [tool_result_message(call["id"], result)], "done": {call["id"]: result}}


# --- the way back: one compensation per node ---------------------------------------------------------------------
def next_undo(state: OrderState) -> str:
    """The first compensation not yet done, or END once the cancellation is sent."""
    todo = [step for step in undo_steps(state["failed"]["succeeded"]) if step not in state["undone"]]
    return todo[0] if todo else END


def after_tool(state: OrderState) -> str:
    """After a do step: back to the model, or -- the step failed for good -- into the undo, asking the model nothing."""
    return next_undo(state) if state.get("failed") else "model"


def compensation_node(step: str):
    def compensate(state: OrderState, config) -> dict:
        order_id = config["configurable"]["thread_id"]
        amount, sku = order_details(order_id)
        args = {"refund_charge": {"order_id": order_id, "amount": amount},
                "release_item": {"order_id": order_id, "sku": sku},
                "send_cancellation": {"order_id": order_id}}[step]
        key = f"{order_id}:undo:{step}" if UNDO_KEYED else None
        return {"undone": {step: call_with_retry(step, args, key)}}
    compensate.__name__ = f"undo_{step}"
    return compensate


def route(state: OrderState) -> str:
    call = pending_call(state)
    if call is None:
        return END
    if call["name"] not in TOOL_NAMES:
        raise AgentError(f"the model asked for an unknown tool {call['name']!r}")
    return call["name"]


def build() -> StateGraph:
    builder = StateGraph(OrderState)
    builder.add_node("model", model_node)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, TOOL_NAMES + [END])
    for name in TOOL_NAMES:
        builder.add_node(name, tool_node)
        builder.add_conditional_edges(name, after_tool, ["model", *UNDO_TOOLS])
    for step in UNDO_TOOLS:
        builder.add_node(step, compensation_node(step))
        builder.add_conditional_edges(step, next_undo, [*UNDO_TOOLS, END])
    return builder


# --- run or resume --------------------------------------------------------------------------------------------
@contextmanager
def single_writer(order_id: str, timeout: float = 60.0):
    """One process at a time per order: LangGraph has no owner for a thread. The kernel drops the lock when
    its holder dies, SIGKILL included."""
    with open(state_dir() / f"{order_id}.lock", "w") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AgentError(f"another process has held order {order_id} for {timeout:.0f} s") from None
                time.sleep(0.05)
        yield


def outcome(values: dict) -> str | None:
    """What the order came to, or None while it is under way: the model's final answer, or the undo complete."""
    messages = values.get("messages") or []
    failed = values.get("failed")
    if failed:
        if all(step in values.get("undone", {}) for step in undo_steps(failed["succeeded"])):
            return f"undone ({failed['error']}): {', '.join(undo_steps(failed['succeeded']))}"
        return None
    if messages and messages[-1]["role"] == "assistant" and pending_call(values) is None:
        return next((b["text"] for b in messages[-1]["content"] if b["type"] == "text"), "")
    return None


def run(order_id: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    config = {"configurable": {"thread_id": order_id}}
    with single_writer(order_id):
        conn = sqlite3.connect(state_dir() / "checkpoints.sqlite", check_same_thread=False, timeout=30)
        try:
            graph = build().compile(checkpointer=SqliteSaver(conn))
            snapshot = graph.get_state(config)
            if snapshot.created_at is None:
                print(f"[start] {order_id}")
                inputs = {"messages": [{"role": "user", "content": order_task(order_id)}], "done": {},
                          "failed": None, "undone": {}}
            elif outcome(snapshot.values) is not None:
                print(f"[done earlier] {outcome(snapshot.values)}")
                return
            else:
                print(f"[resume] {order_id}: checkpoint at step {snapshot.metadata['step']}")
                inputs = None
            state = graph.invoke(inputs, config, durability=DURABILITY)
            if outcome(state) is None:
                raise AgentError(f"order {order_id} stopped before it was done or undone")
            print(f"[done] {outcome(state)}")
        finally:
            conn.close()


if __name__ == "__main__":
    agent_main(run)
