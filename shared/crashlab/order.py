"""The one order task that runs through every lesson, the order catalogue, and the tools the model may pick."""

from __future__ import annotations

import difflib
import hashlib
import re

ORDER_ID = "ORD-8842"
# What an order id looks like: ORD-, then groups of letters and digits joined by single dashes
# (ORD-8842, ORD-77-B). The model reads the whole id out of the task, dashes included.
ORDER_ID_PATTERN = r"ORD-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
AMOUNT = 49.99
SKU = "SKU-772"

# The order catalogue: what each order costs and which item it reserves. Every lesson's order, ORD-8842, and
# any id not listed here keep $49.99 and SKU-772 (so no notebook's output changes). The soak's orders,
# ORD-SOAK-NNNN, each get an amount and a SKU of their own, derived from the id and so the same in every
# process: a soak runs many different orders, and its audit tells one order's charge from another's.
CATALOGUE: dict[str, tuple[float, str]] = {ORDER_ID: (AMOUNT, SKU)}
SOAK_ORDER_PATTERN = r"ORD-SOAK-\d+"

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


def order_details(order_id: str) -> tuple[float, str]:
    """``(amount, sku)`` of an order: from :data:`CATALOGUE`; for a soak order (``ORD-SOAK-0042``), an amount
    between $5.00 and $499.99 and a SKU from SKU-100 to SKU-999 (never the lessons' $49.99 and SKU-772), fixed by
    the id; for any other id, the lessons' :data:`AMOUNT` and :data:`SKU`."""
    if order_id in CATALOGUE:
        return CATALOGUE[order_id]
    if not re.fullmatch(SOAK_ORDER_PATTERN, order_id):
        return AMOUNT, SKU
    digest = hashlib.sha256(order_id.encode()).digest()  # not hash(): that differs from process to process
    cents = 500 + int.from_bytes(digest[:4], "big") % 49_500
    if cents == round(AMOUNT * 100):
        cents += 1
    number = 100 + int.from_bytes(digest[4:8], "big") % 899  # 100..998, then 772 and above move up one
    return cents / 100, f"SKU-{number + (number >= 772)}"


def effect_mismatches(order_id: str, effects: dict[str, list[dict]]) -> list[str]:
    """What the world did for ``order_id`` that the catalogue does not say: a charge of another amount, a
    reservation of another SKU (``effects`` as in an audit: kind -> effects, each with its ``params``)."""
    amount, sku = order_details(order_id)
    wrong = []
    for effect in effects.get("charge", []):
        charged = effect.get("params", {}).get("amount")
        if not isinstance(charged, (int, float)) or round(charged * 100) != round(amount * 100):
            wrong.append(f"charged {charged!r} instead of ${amount:.2f}")
    for effect in effects.get("reservation", []):
        reserved = effect.get("params", {}).get("sku")
        if reserved != sku:
            wrong.append(f"reserved {reserved!r} instead of {sku}")
    return wrong


def order_task(order_id: str = ORDER_ID, amount: float | None = None, sku: str | None = None) -> str:
    """The user's request that starts every conversation for ``order_id``; the amount and SKU are the
    order's own (:func:`order_details`) unless given."""
    default_amount, default_sku = order_details(order_id)
    amount = default_amount if amount is None else amount
    sku = default_sku if sku is None else sku
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
