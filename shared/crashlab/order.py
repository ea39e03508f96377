"""The one order task that runs through every lesson, and the tools the model may pick."""

from __future__ import annotations

import difflib
import re

ORDER_ID = "ORD-8842"
# What an order id looks like: ORD-, then groups of letters and digits joined by single dashes
# (ORD-8842, ORD-77-B). The model reads the whole id out of the task, dashes included.
ORDER_ID_PATTERN = r"ORD-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
AMOUNT = 49.99
SKU = "SKU-772"

# The three side-effecting tools, in the order the task asks for them.
TOOL_ORDER = ("charge_card", "reserve_item", "send_confirmation")

# Which service each tool talks to, and the kind of effect the world records for it.
EFFECT_KIND = {
    "charge_card": "charge",
    "reserve_item": "reservation",
    "send_confirmation": "confirmation",
}

TOOLS = [
    {
        "name": "charge_card",
        "description": "Charge the customer's card for an order. Amount in US dollars.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "amount": {"type": "number"},
            },
            "required": ["order_id", "amount"],
        },
    },
    {
        "name": "reserve_item",
        "description": "Reserve one unit of a stock-keeping unit for an order.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "sku": {"type": "string"},
            },
            "required": ["order_id", "sku"],
        },
    },
    {
        "name": "send_confirmation",
        "description": "Email the customer that their order is confirmed.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
]

TOOL_SCHEMAS = {tool["name"]: tool["input_schema"] for tool in TOOLS}


def order_task(order_id: str = ORDER_ID, amount: float = AMOUNT, sku: str = SKU) -> str:
    """The user's request that starts every conversation for ``order_id``."""
    return (
        f"Process order {order_id}: charge the card ${amount:.2f}, reserve item {sku}, "
        "then send an order confirmation. Call exactly one tool per turn, in that order, "
        "and say that you are done once all three steps are complete."
    )


def default_points(model_calls: int = len(TOOL_ORDER) + 1) -> list[str]:
    """Every crash point a correct run of the order task passes through, in order.

    A run makes four model calls (one per tool, then the final answer) and three tool calls.
    """
    points: list[str] = []
    for n in range(1, model_calls + 1):
        points += [f"before:model#{n}", f"after:model#{n}"]
        if n <= len(TOOL_ORDER):
            tool = TOOL_ORDER[n - 1]
            points += [f"before:{tool}", f"after:{tool}"]
    return points


def check_crash_point(text: str) -> str:
    """``text`` as a crash point (``before:OP`` / ``after:OP``, OP = ``model#N`` with N >= 1 or a tool of the
    order), normalised; ValueError saying what is wrong otherwise. A point no run can reach (a tool that
    does not exist) is refused here rather than reported as "never reached" after a whole run."""
    when, colon, op = (part.strip() for part in text.partition(":"))
    forms = f"before:OP or after:OP, OP = model#N (N >= 1) or a tool: {', '.join(TOOL_ORDER)}"
    if when not in ("before", "after") or not colon:
        raise ValueError(f"crash point {text!r} is not {forms}")
    model = re.fullmatch(r"model#(\d+)", op)
    if model:
        if int(model.group(1)) < 1:
            raise ValueError(f"crash point {text!r}: model calls are counted from 1 (model#1 is the first)")
        return f"{when}:model#{int(model.group(1))}"
    if op not in TOOL_ORDER:
        close = difflib.get_close_matches(op, list(TOOL_ORDER), n=1)
        hint = f"did you mean {when}:{close[0]}? " if close else ""
        raise ValueError(f"crash point {text!r}: unknown tool {op!r}: {hint}OP is model#N or one of {', '.join(TOOL_ORDER)}")
    return f"{when}:{op}"
