"""A fixture agent for the compensation lesson on Temporal: lesson 5's agent process (a worker and a client at
once, the workflow id is the order id, the "tuned" profile: a dead worker's sticky queue given up after 1 s and
short activity timeouts) running the saga of ``saga_workflow.py``: when a step fails for good, the workflow
runs its compensations in reverse, each keyed by the order and the step. The code, not the model, decides.

``temporal_naive_compensating_agent.py`` runs the same saga with no keys on the compensations.
"""
import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.worker import Worker

from crashlab.agent import AgentError, agent_main
from crashlab.temporal_server import connect
from saga_activities import ask_model, compensate, run_tool
from saga_workflow import OrderSagaWorkflow

TASK_QUEUE = "orders"
TIMEOUTS = {"model_timeout_s": 3, "tool_timeout_s": 2}
WAIT_S = float(os.environ.get("CRASHLAB_TEMPORAL_WAIT", "120"))


async def start_or_attach(client, order_id: str):
    """The workflow id is the order id: a second start attaches to the running workflow."""
    try:
        return await client.start_workflow(
            OrderSagaWorkflow.run, {"order_id": order_id, **TIMEOUTS}, id=order_id, task_queue=TASK_QUEUE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE)
    except WorkflowAlreadyStartedError:
        return client.get_workflow_handle(order_id)  # it finished earlier: its result is in the history


async def failed_task(handle, identity: str) -> str | None:
    """Why this worker cannot make progress, if the workflow's last workflow task failed here."""
    last = None
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_failed_event_attributes") or event.HasField(
                "workflow_task_completed_event_attributes"):
            last = event
    if last is not None and last.HasField("workflow_task_failed_event_attributes"):
        failed = last.workflow_task_failed_event_attributes
        if failed.identity == identity:
            return failed.failure.message or "the workflow task failed"
    return None


async def main(order_id: str) -> None:
    client = await connect()
    with ThreadPoolExecutor(max_workers=4) as pool:
        async with Worker(client, task_queue=TASK_QUEUE, workflows=[OrderSagaWorkflow],
                          activities=[ask_model, run_tool, compensate], activity_executor=pool,
                          sticky_queue_schedule_to_start_timeout=timedelta(seconds=1)):
            handle = await start_or_attach(client, order_id)
            result = asyncio.ensure_future(handle.result())
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while not result.done():
                await asyncio.wait([result], timeout=1.0)
                if result.done():
                    break
                reason = await failed_task(handle, client.identity)
                if reason or asyncio.get_running_loop().time() > deadline:
                    result.cancel()
                    why = reason or f"still running after {WAIT_S:.0f} s"
                    raise AgentError(f"workflow {order_id} is stuck: {why[:300]}")
            try:
                outcome = result.result()
            except WorkflowFailureError as exc:
                raise AgentError(f"workflow {order_id} failed: {exc.cause}") from None
    print(f"[{outcome['status']}] {outcome['final']}")


def run(order_id: str) -> None:
    code = 0
    try:
        asyncio.run(main(order_id))
    except AgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    # Leave at once: an interpreter teardown can race the Temporal runtime's threads (as lesson 5's agent does).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    agent_main(run)
