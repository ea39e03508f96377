"""The scripted model's answer to a backlog conversation (:mod:`crashlab.backlog`), and the backlog's tool results.

:mod:`crashlab.world.policy` hands a conversation here when its first user message names a backlog. The model reads
its progress from the conversation alone, as it does for one order: the tool calls it can see that got a successful
result (each by the ``order_id`` in its input), plus the most steps done that any :func:`~crashlab.backlog.progress_line`
of the backlog in the conversation reports (what a compaction left). The next step is the first step of the plan not
done; with every step done, the final answer.

A request whose last user message asks :data:`~crashlab.backlog.SUMMARY_ASK` (offering no tools) is answered with the
progress line and ``end_turn``; the world's model ledger files it as a summary, so the audit never takes it for the
backlog's final answer.

Tool results of a configurable size (``World.start(result_bytes=N)``): the 200 reply of a backlog order's tool call
carries a ``receipt`` of N characters, so a lesson can make its conversation -- and every engine's record of it --
grow as fast as it wants. The receipt is part of the reply the world keeps under an idempotency key, so a replayed
key answers the same bytes.
"""

from __future__ import annotations

import secrets
from typing import Any

from crashlab.backlog import (SUMMARY_ASK, Step, backlog_of, backlog_orders, named_backlog, plan, progress_in,
                              progress_line, step_input)


def texts(message: dict) -> list[str]:
    """The text blocks of a normalised message."""
    return [block["text"] for block in message["content"] if block["type"] == "text"]


def backlog_from(messages: list[dict]) -> str | None:
    """The backlog the conversation is about: the one its first user message names, or None."""
    return named_backlog(" ".join(texts(messages[0])))


def asks_summary(messages: list[dict]) -> bool:
    """Whether the conversation's last (user) message asks to summarise the progress."""
    return any(SUMMARY_ASK in text for text in texts(messages[-1]))


def is_summary(messages: list[dict]) -> bool:
    """Whether the request is a backlog's summary request: what the model ledger files as a summary."""
    return backlog_from(messages) is not None and asks_summary(messages)


def steps_done(backlog: str, messages: list[dict]) -> int:
    """How many steps of the backlog's plan the conversation shows done: the most a progress line reports, then every
    step after it whose call got a successful result, in plan order (the first step not done stops the count)."""
    steps = plan(backlog)
    done = max((progress_in(text, backlog) or 0 for message in messages for text in texts(message)), default=0)
    called: dict[Any, Step] = {}
    succeeded: set[Step] = set()
    for message in messages:
        for block in message["content"]:
            if block["type"] == "tool_use":
                order_id = (block.get("input") or {}).get("order_id")
                called[block["id"]] = Step(str(order_id), str(block["name"]))
            elif block["type"] == "tool_result" and not block["is_error"] and block["tool_use_id"] in called:
                succeeded.add(called[block["tool_use_id"]])
    done = min(done, len(steps))
    while done < len(steps) and steps[done] in succeeded:
        done += 1
    return done


def reply(request: dict, messages: list[dict], backlog: str) -> dict:
    """The Messages API response to a backlog conversation (already normalised and checked): the progress line when
    asked to summarise, the next step's tool call, or the final answer."""
    done = steps_done(backlog, messages)
    steps = plan(backlog)
    content: list[dict[str, Any]]
    if asks_summary(messages):
        content, stop_reason = [{"type": "text", "text": progress_line(backlog, done)}], "end_turn"
    elif done >= len(steps):
        orders = len(backlog_orders(backlog))
        content = [{"type": "text", "text": f"Backlog {backlog} is complete: {orders} orders charged, reserved and "
                                            "confirmed."}]
        stop_reason = "end_turn"
    else:
        step = steps[done]
        content = [{"type": "text", "text": f"Next step ({done + 1} of {len(steps)}): {step.tool} for {step.order_id}."},
                   {"type": "tool_use", "id": "toolu_" + secrets.token_hex(12), "name": step.tool,
                    "input": step_input(step)}]
        stop_reason = "tool_use"
    return {"id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant",
            "model": request.get("model") or "crashlab-scripted", "content": content, "stop_reason": stop_reason,
            "stop_sequence": None, "usage": {"input_tokens": 40 * len(messages), "output_tokens": 25}}


def receipt(order_id: str, effect_id: str, size: int) -> dict:
    """What a backlog order's successful tool reply carries besides the effect: a ``receipt`` of ``size`` characters
    (none when ``size`` is 0, or for an order of no backlog: every other lesson's replies stay as they are)."""
    if size <= 0 or backlog_of(order_id) is None:
        return {}
    line = f"Receipt {effect_id} for {order_id}: thank you for your order. "
    return {"receipt": (line * (size // len(line) + 1))[:size]}


__all__ = ["asks_summary", "backlog_from", "is_summary", "receipt", "reply", "steps_done", "texts"]
