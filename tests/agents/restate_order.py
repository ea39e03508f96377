"""The order as a Restate virtual object keyed by order id: the handler decides, ``ctx.run`` acts.

Every model call and every tool call is a ``ctx.run`` step: its result goes into the invocation's journal, so
when Restate retries the invocation (the endpoint's process was killed) the handler replays and the journaled
steps are not run again. The one step that was under way when the process died runs again; its idempotency key
(the invocation id and the step's name) is the same on every attempt, so the world replays its first effect.
"""
import os
from datetime import timedelta

import restate
from restate import InvocationRetryPolicy, RunOptions, TerminalError

from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, CallFailed, MalformedToolCall, call_tool, content_to_dicts,
                            first_tool_use, model_client, order_task, state_dir, tool_result_message)
from crashlab.restate_server import endpoint_for

# One service name per world (see crashlab.restate_server.endpoint_for): many worlds share one server.
SERVICE = endpoint_for(state_dir())["service"]

# A dead endpoint's invocation is retried quickly and for a long time: the next agent process may take a
# few seconds to come up. (The server's inactivity/abort timeouts only matter for a hung, not a dead, endpoint.)
RETRY = InvocationRetryPolicy(initial_interval=timedelta(milliseconds=100), exponentiation_factor=2.0,
                              max_interval=timedelta(milliseconds=500), max_attempts=2000, on_max_attempts="pause")
TUNED = os.environ.get("CRASHLAB_RESTATE_PROFILE", "tuned") == "tuned"  # "defaults": the server's policy
order = restate.VirtualObject(SERVICE, invocation_retry_policy=RETRY if TUNED else None,
                              inactivity_timeout=timedelta(seconds=30), abort_timeout=timedelta(seconds=5))

# Retry a failed step inside the attempt a few times (a service outage), then fail the attempt.
STEP = RunOptions(max_attempts=None, initial_retry_interval=timedelta(milliseconds=200),
                  max_retry_interval=timedelta(seconds=2))


def ask_model(messages: list) -> dict:
    reply = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
    return {"stop_reason": reply.stop_reason, "content": content_to_dicts(reply.content)}


def run_tool(name: str, args: dict, key: str) -> dict:
    try:
        return call_tool(name, args, idempotency_key=key)
    except MalformedToolCall as exc:
        raise TerminalError(str(exc)) from None
    except CallFailed as exc:
        if exc.retryable:
            raise  # Restate retries the step with the same key
        raise TerminalError(str(exc)) from None


@order.handler()
async def run(ctx: restate.ObjectContext, order_id: str) -> dict:
    messages = [{"role": "user", "content": order_task(order_id)}]
    done = []
    for turn in range(1, 11):
        reply = await ctx.run_typed(f"model#{turn}", ask_model, STEP, messages=messages)
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] != "tool_use":
            ctx.set("status", "done")
            return {"order_id": order_id, "status": "done", "done": done, "final": reply["content"][0]["text"]}
        call = first_tool_use(reply["content"])
        key = f"{ctx.request().id}/{turn}/{call['name']}"  # stable across attempts and replays
        result = await ctx.run_typed(call["name"], run_tool, STEP, name=call["name"], args=call["input"], key=key)
        done.append(call["name"])
        ctx.set("done", done)
        messages.append(tool_result_message(call["id"], result))
    raise TerminalError("the model did not finish the order in 10 turns")


@order.handler(kind="shared")
async def status(ctx: restate.ObjectSharedContext) -> dict:
    return {"status": await ctx.get("status") or "running", "done": await ctx.get("done") or []}


app = restate.app(services=[order])
