"""The scripted model: reads a conversation and picks the next tool, like a well-behaved LLM would.

It answers the Anthropic Messages API request body with a Messages API response body. Because it
decides from the conversation alone, a resumed conversation gets the right next step, and a
conversation that has already seen every tool succeed gets the final answer.

Offered the undo tools as well (``crashlab.order.TOOLS_WITH_UNDO``), it also undoes an order: when a tool
result reports a permanent failure (``out_of_stock``, say) or a user message asks for the order to be
undone, it picks the compensations of the steps that succeeded, one per turn, in reverse order, then the
cancellation, then says the order was undone. Offered only ``TOOLS``, it behaves as it always has.

A conversation whose first user message names a backlog (the long task, :mod:`crashlab.backlog`) is answered by
:mod:`crashlab.world.backlog_policy`, and its model calls are filed under the backlog's id (:func:`order_of`).
"""

from __future__ import annotations

from typing import Any, Callable

import re
import secrets

from crashlab.errors import CrashlabError
from crashlab.order import ALL_TOOL_SCHEMAS, FAILURE_REASONS, ORDER_ID_PATTERN, TOOL_ORDER, UNDO_TOOLS, undo_steps
from crashlab.world import backlog_policy


class InvalidRequest(CrashlabError, ValueError):
    """The request is not a valid Messages API conversation (HTTP 400, like the real API)."""


def normalize_messages(messages) -> list[dict]:
    """Reduce a message list to what it means, so that two requests that say the same thing compare
    equal however the client serialised them (a plain string vs. a text block, extra null fields)."""
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: a non-empty list is required")
    normal = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}: each message needs a role of 'user' or 'assistant'")
        normal.append({"role": message["role"], "content": _normalize_content(message.get("content"), i)})
    return normal


def _normalize_content(content, i: int) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise InvalidRequest(f"messages.{i}.content: a string or a non-empty list of blocks is required")
    blocks: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "tool_use":
            blocks.append({"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                           "input": block.get("input") or {}})
        elif kind == "tool_result":
            inner = block.get("content", "")
            if isinstance(inner, list):
                inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
            blocks.append({"type": "tool_result", "tool_use_id": block.get("tool_use_id"),
                           "content": str(inner), "is_error": bool(block.get("is_error", False))})
        else:
            raise InvalidRequest(f"messages.{i}.content.{j}: unsupported block type {kind!r}")
    return blocks


def check_conversation(messages: list[dict]) -> None:
    """Enforce the rules the real API enforces: alternate roles, start and end with the user, and
    answer every tool_use with a tool_result (same id) in the very next message."""
    if messages[0]["role"] != "user" or messages[-1]["role"] != "user":
        raise InvalidRequest("messages: the conversation must start and end with a user message")
    for i in range(1, len(messages)):
        if messages[i]["role"] == messages[i - 1]["role"]:
            raise InvalidRequest(f"messages.{i}: roles must alternate between 'user' and 'assistant'")
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        asked = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
        if not asked:
            continue
        answered = {b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"}
        missing = asked - answered
        if missing:
            raise InvalidRequest(
                f"messages.{i + 1}: tool_use ids {sorted(missing)} have no tool_result block in the next message"
            )


def order_from(messages: list[dict]) -> dict:
    """Read the order id, amount and SKU out of the first user message."""
    text = " ".join(b["text"] for b in messages[0]["content"] if b["type"] == "text")
    order = re.search(rf"\b{ORDER_ID_PATTERN}", text)
    amount = re.search(r"\$(\d+(?:\.\d{1,2})?)", text)
    sku = re.search(r"\bSKU-[A-Za-z0-9]+", text)
    if not (order and amount and sku):
        raise InvalidRequest("the first user message must name an order (ORD-…), an amount ($…) and a SKU (SKU-…)")
    return {"order_id": order.group(0), "amount": float(amount.group(1)), "sku": sku.group(0)}


def order_of(messages: list[dict]) -> str:
    """The order a conversation is about, as the model ledger files its calls: the backlog it names, or the order of
    :func:`order_from` (InvalidRequest when it names neither)."""
    return backlog_policy.backlog_from(messages) or order_from(messages)["order_id"]


def completed_tools(messages: list[dict]) -> set[str]:
    """Tools whose call got a successful tool_result somewhere in the conversation."""
    names = {}
    done = set()
    for message in messages:
        for block in message["content"]:
            if block["type"] == "tool_use":
                names[block["id"]] = block["name"]
            elif block["type"] == "tool_result" and not block["is_error"]:
                if block["tool_use_id"] in names:
                    done.add(names[block["tool_use_id"]])
    return done


def offers_undo(request: dict) -> bool:
    """True when the request's tools include every undo tool."""
    tools = request.get("tools")
    names = {tool.get("name") for tool in tools if isinstance(tool, dict)} if isinstance(tools, list) else set()
    return set(UNDO_TOOLS) <= names


def permanent_failure(messages: list[dict]) -> tuple[str, str] | None:
    """``(tool, reason)`` of the first do step whose error result reports a permanent failure, or None."""
    names: dict[str, str] = {}
    for message in messages:
        for block in message["content"]:
            if block["type"] == "tool_use":
                names[block["id"]] = block["name"]
            elif block["type"] == "tool_result" and block["is_error"]:
                tool = names.get(block["tool_use_id"])
                for reason in FAILURE_REASONS.get(tool or "", ()):
                    if reason in block["content"]:
                        return str(tool), reason
    return None


def undo_asked(messages: list[dict]) -> str | None:
    """``"first"`` if the task itself asks to undo the order, ``"later"`` if a later user message does, else None."""
    for i, message in enumerate(messages):
        if message["role"] == "user" and any(b["type"] == "text" and re.search(r"\bundo\b", b["text"], re.I)
                                             for b in message["content"]):
            return "first" if i == 0 else "later"
    return None


def _plan(request: dict, messages: list[dict], done: set[str]) -> tuple[list[str], str | None]:
    """The tools still to call, in order, and -- when the order is being undone -- why (None otherwise)."""
    if offers_undo(request):
        failure = permanent_failure(messages)
        asked = undo_asked(messages)
        if (failure and failure[0] not in done) or asked:
            succeeded = set(TOOL_ORDER) if asked == "first" else done
            why = f"could not be completed ({failure[0]} failed: {failure[1]})" if failure and not asked \
                else "was cancelled"
            return [step for step in undo_steps(succeeded) if step not in done], why
    return [name for name in TOOL_ORDER if name not in done], None


# Ways a reply can be malformed on purpose, to teach that a tool call is untrusted input.
MALFORMED_REPLIES = ("unknown_tool", "missing_args", "bad_type")
# What the world can be told to make its model do (World.inject): a malformed reply; several tool_use blocks in one
# reply (:func:`next_calls`), one firing per reply, so arm it for as many replies as the run makes; a streamed reply
# whose connection drops mid-answer (crashlab.world.stream).
MODEL_FAULTS = ("malformed_reply", "parallel_tool_use", "cut_stream")
# The faults that take an argument: what it must be, and how to say so.
MODEL_FAULT_ARGS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "malformed_reply": (lambda arg: arg in MALFORMED_REPLIES, f"one of {MALFORMED_REPLIES}"),
    "cut_stream": (lambda arg: arg is None or (str(arg).isdigit() and int(arg) >= 1),
                   "how many text deltas are sent before the cut, such as '3' (1 when not given)")}


# The steps that may run side by side: the charge and the reservation do not depend on each other; the
# confirmation tells the customer both are done, so it waits for them.
PARALLEL_TOOLS = ("charge_card", "reserve_item")


def next_calls(pending: list[str], undoing: str | None, parallel: bool) -> list[str]:
    """The tools the next reply asks for: the first pending one; with ``parallel``, while the order is being
    done (not undone), every pending step that may run side by side, in one reply -- as a real model does
    unless the request sets ``disable_parallel_tool_use``."""
    if parallel and not undoing:
        together = [name for name in pending if name in PARALLEL_TOOLS]
        if len(together) > 1:
            return together
    return pending[:1]


def parallel_allowed(request) -> bool:
    """Whether the request lets the model ask for several tools in one reply: not when its ``tool_choice`` sets
    ``disable_parallel_tool_use`` (as the Messages API honours it)."""
    choice = request.get("tool_choice") if isinstance(request, dict) else None
    return not (isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True)


def reply(request: dict, *, malformed: str | None = None, parallel: bool = False) -> dict:
    """The Messages API response to ``request``. ``parallel``: ask for several tools in one reply where the order
    allows it (:func:`next_calls`) and the request does (:func:`parallel_allowed`); off, one tool per reply, as
    every lesson's agent expects."""
    if not isinstance(request, dict):
        raise InvalidRequest("the request body must be a JSON object")
    parallel = parallel and parallel_allowed(request)
    messages = normalize_messages(request.get("messages"))
    check_conversation(messages)
    backlog = backlog_policy.backlog_from(messages)
    if backlog is not None:
        if backlog_policy.asks_summary(messages) and request.get("tools"):
            raise InvalidRequest("a request that asks to summarise the progress offers no tools: send it without tools")
        return backlog_policy.reply(request, messages, backlog)
    order = order_from(messages)
    done = completed_tools(messages)
    pending, undoing = _plan(request, messages, done)
    model = request.get("model") or "crashlab-scripted"
    if not pending and undoing:
        steps = [what for step, what in (("release_item", f"{order['sku']} was released"),
                                          ("refund_charge", f"the charge of ${order['amount']:.2f} was refunded"),
                                          ("send_cancellation", "a cancellation was sent")) if step in done]
        undone = ", ".join(steps[:-1]) + " and " + steps[-1] if len(steps) > 1 else "".join(steps)
        text = f"Order {order['order_id']} {undoing} and has been undone: {undone or 'nothing was left to undo'}."
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        stop_reason = "end_turn"
    elif not pending:
        text = (f"Order {order['order_id']} is complete: the card was charged ${order['amount']:.2f}, "
                f"{order['sku']} is reserved, and the confirmation was sent.")
        content = [{"type": "text", "text": text}]
        stop_reason = "end_turn"
    else:
        calls: list[dict[str, Any]] = []
        for name in next_calls(pending, undoing, parallel):
            args = {key: order[key] for key in ALL_TOOL_SCHEMAS[name]["required"]}
            if malformed and not calls:  # a malformed reply spoils its first call
                if malformed == "unknown_tool":
                    name = "refund_card"
                elif malformed == "missing_args":
                    args.pop(next(iter(args)))
                elif malformed == "bad_type":
                    args["order_id"] = 8842
            calls.append({"type": "tool_use", "id": "toolu_" + secrets.token_hex(12), "name": name, "input": args})
        content = [{"type": "text", "text": f"Next step{'s' if len(calls) > 1 else ''}: "
                                            f"{' and '.join(call['name'] for call in calls)}."}] + calls
        stop_reason = "tool_use"
    return {
        "id": "msg_" + secrets.token_hex(12),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 40 * len(messages), "output_tokens": 25},
    }
