"""A fixture agent for the compensation lesson on DBOS: lesson 4's order workflow (SQLite system database, the
workflow id is the order id, a pinned application version, keys from the workflow id and the step id), plus a
way back. A try/except in the workflow around the steps catches a step that failed for good; the except block
runs the compensations -- DBOS steps too, each keyed by the order and the step (``ORD-8842:undo:refund_charge``)
-- in reverse order of the steps that succeeded, then sends the cancellation. The failed step's error is in the
journal like a result, so a recovered workflow takes the same branch, skips the compensations already
journalled and re-runs the interrupted one under its key. The code, not the model, decides to undo.

``dbos_naive_compensating_agent.py`` runs the same workflow with no keys on the compensations.
"""

import fcntl
import os

from dbos import DBOS, SetWorkflowID

from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, AgentError, ModelCallFailed, ToolCallFailed, WorldNotRunning,
                            agent_main, call_tool, content_to_dicts, first_tool_use, model_client, order_task,
                            state_dir, tool_result_message)
from crashlab.order import order_details, undo_steps

# Pinned: DBOS.launch() recovers only the workflows of its own version.
APP_VERSION = "order-saga-1"
UNDO_KEYED = True  # the naive variant sets this to False


def worth_retrying(error: BaseException) -> bool:
    """No answer, a 5xx, the world unreachable: worth another attempt. A permanent failure never is."""
    if isinstance(error, (ToolCallFailed, ModelCallFailed)):
        return error.retryable
    return isinstance(error, WorldNotRunning)


PATIENT = dict(retries_allowed=True, max_attempts=10, interval_seconds=0.5, backoff_rate=1.7,
               should_retry=worth_retrying)


@DBOS.step(**PATIENT)
def ask_model(messages: list[dict]) -> dict:
    reply = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
    return {"stop_reason": reply.stop_reason, "content": content_to_dicts(reply.content)}


@DBOS.step(**PATIENT)
def run_tool(name: str, args: dict) -> dict:
    """One side effect. A permanent failure is raised at once and journalled as this step's outcome."""
    return call_tool(name, args, idempotency_key=f"{DBOS.workflow_id}:step-{DBOS.step_id}:{name}")


@DBOS.step(**PATIENT)
def compensate(order_id: str, step: str) -> dict:
    """One compensation, keyed by the order and the step: a re-run after a crash is replayed by the service."""
    amount, sku = order_details(order_id)
    args = {"refund_charge": {"order_id": order_id, "amount": amount},
            "release_item": {"order_id": order_id, "sku": sku},
            "send_cancellation": {"order_id": order_id}}[step]
    return call_tool(step, args, idempotency_key=f"{order_id}:undo:{step}" if UNDO_KEYED else None)


@DBOS.workflow()
def process_order(order_id: str, task: str) -> dict:
    messages = [{"role": "user", "content": task}]
    done: list[str] = []
    try:
        for _turn in range(10):
            reply = ask_model(messages)
            messages.append({"role": "assistant", "content": reply["content"]})
            if reply["stop_reason"] != "tool_use":
                return {"status": "done", "final": reply["content"][0]["text"]}
            call = first_tool_use(reply["content"])
            result = run_tool(call["name"], call["input"])
            done.append(call["name"])
            messages.append(tool_result_message(call["id"], result))
        raise AgentError("gave up: too many turns")
    except ToolCallFailed as exc:
        if not exc.permanent:
            raise
        for step in undo_steps(done):  # reverse order of the steps that succeeded, then the cancellation
            compensate(order_id, step)
        return {"status": "undone", "final": f"undone ({exc}): {', '.join(undo_steps(done))}"}


def hold_executor_lock() -> int:
    """Be the only live process acting as executor "local"; a second resumer waits here. The kernel releases
    the lock when this process dies, SIGKILL included."""
    fd = os.open(state_dir() / "dbos-executor.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def run(order_id: str) -> None:
    hold_executor_lock()
    DBOS(config={"name": "order-agent", "system_database_url": f"sqlite:///{state_dir() / 'dbos.sqlite'}",
                 "log_level": "WARNING", "application_version": APP_VERSION,
                 "notification_listener_polling_interval_sec": 0.1})
    DBOS.launch()  # recovers this executor's PENDING workflows of this version
    try:
        task = order_task(order_id)
        status = DBOS.get_workflow_status(order_id)
        if status is None:
            with SetWorkflowID(order_id):  # the workflow id is the order id
                handle = DBOS.start_workflow(process_order, order_id, task)
        else:
            if list((status.input or {}).get("args", ()))[:2] != [order_id, task]:
                raise AgentError(f"workflow {order_id} already exists with other inputs")
            print(f"[resume] {order_id} is {status.status}")
            handle = DBOS.retrieve_workflow(order_id)
        print(f"[done] {handle.get_result(polling_interval_sec=0.1)['final']}")
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    agent_main(run)
