"""The activities of the Temporal compensating agent (``temporal_compensating_agent.py``): lesson 5's model call
and tool call, plus one compensation. A step that fails for good is raised as a non-retryable ApplicationError:
Temporal would otherwise retry it until the schedule-to-close timeout, and the workflow would never learn that
it has to undo the order."""
from temporalio import activity
from temporalio.exceptions import ApplicationError

import anthropic  # noqa: F401 -- imported now, not inside the first model activity, whose clock is running

from crashlab.agent import MAX_TOKENS, MODEL, TOOLS, ToolCallFailed, call_tool, content_to_dicts, model_client
from crashlab.order import order_details

UNDO_KEYED = True  # the naive variant sets this to False


def keyed_call(name: str, args: dict, key: str | None) -> dict:
    """call_tool, its permanent failure mapped to a non-retryable ApplicationError of the same type."""
    try:
        return call_tool(name, args, idempotency_key=key)
    except ToolCallFailed as exc:
        if exc.permanent:
            raise ApplicationError(str(exc), type=exc.error_type, non_retryable=True) from None
        raise  # no reply, a 409, a 5xx: retried by the retry policy, under the same key


@activity.defn
def ask_model(messages: list[dict]) -> dict:
    reply = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
    return {"stop_reason": reply.stop_reason, "content": content_to_dicts(reply.content)}


@activity.defn
def run_tool(name: str, args: dict) -> dict:
    """One side effect, keyed by the workflow and the activity: the same key on every attempt."""
    info = activity.info()
    return keyed_call(name, args, f"{info.workflow_id}/{info.activity_id}/{name}")


@activity.defn
def compensate(step: str) -> dict:
    """One compensation, keyed by the order (the workflow id) and the step."""
    order_id = activity.info().workflow_id
    amount, sku = order_details(order_id)
    args = {"refund_charge": {"order_id": order_id, "amount": amount},
            "release_item": {"order_id": order_id, "sku": sku},
            "send_cancellation": {"order_id": order_id}}[step]
    return keyed_call(step, args, f"{order_id}:undo:{step}" if UNDO_KEYED else None)
