"""The one order task that runs through every lesson, the order catalogue, and the tools the model may pick:
the three that do the order and, for the compensation lesson, the three that undo it."""

from __future__ import annotations

import copy
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
# A backlog (crashlab.backlog): ORD-BL-, its number of orders, an optional tag; its orders add -001, -002, ... Each
# order of a backlog gets an amount and a SKU of its own, as a soak order does.
BACKLOG_PATTERN = r"ORD-BL-(\d{1,3})(?:-[A-Z][A-Z0-9]*)?"

# The three side-effecting tools, in the order the task asks for them.
TOOL_ORDER = ("charge_card", "reserve_item", "send_confirmation")

# The compensating tools: each undoes one kind of effect, with an idempotency key of its own.
UNDO_TOOLS = ("refund_charge", "release_item", "send_cancellation")
ALL_TOOLS = TOOL_ORDER + UNDO_TOOLS
# Which compensation undoes which step. An email cannot be unsent: a confirmation is answered by the
# cancellation that ends every undo.
COMPENSATION = {"charge_card": "refund_charge", "reserve_item": "release_item", "send_confirmation": "send_cancellation"}

# Which service each tool talks to, and the kind of effect the world records for it.
EFFECT_KIND = {
    "charge_card": "charge",
    "reserve_item": "reservation",
    "send_confirmation": "confirmation",
    "refund_charge": "refund",
    "release_item": "release",
    "send_cancellation": "cancellation",
}

# Permanent failures the world can be told to give, per order and tool (World.fail_permanently): the reason
# (the error's ``type``) and its HTTP status. None of them is retryable: the same call fails the same way.
FAILURE_REASONS = {
    "charge_card": {"card_declined": 402},
    "reserve_item": {"out_of_stock": 422},
    "send_confirmation": {"address_rejected": 422},
}
PERMANENT_ERRORS = frozenset(reason for reasons in FAILURE_REASONS.values() for reason in reasons)

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


def _undo(name: str, undoes: str, description: str) -> dict:
    """An undo tool takes the same arguments as the step it undoes (a copy: TOOLS is never shared out)."""
    return {"name": name, "description": description, "input_schema": copy.deepcopy(TOOL_SCHEMAS[undoes])}


# The undo tools, offered to the model only by agents that pass TOOLS_WITH_UNDO: TOOLS, which every other lesson
# sends, stays as it is.
COMPENSATION_TOOLS = [
    _undo("refund_charge", "charge_card",
          "Refund an order's charge to the customer's card (undoes charge_card). Amount in US dollars."),
    _undo("release_item", "reserve_item",
          "Release the unit of a stock-keeping unit reserved for an order (undoes reserve_item)."),
    _undo("send_cancellation", "send_confirmation", "Email the customer that their order is cancelled."),
]
TOOLS_WITH_UNDO = TOOLS + COMPENSATION_TOOLS
ALL_TOOL_SCHEMAS = {tool["name"]: tool["input_schema"] for tool in TOOLS_WITH_UNDO}


def undo_steps(done) -> list[str]:
    """The compensations that undo the steps in ``done``, in reverse order of the steps, then the cancellation
    (an email cannot be taken back, so the notice that ends the undo comes last, and always)."""
    steps = [COMPENSATION[tool] for tool in reversed(TOOL_ORDER) if tool in done and tool != "send_confirmation"]
    return steps + ["send_cancellation"]


def order_details(order_id: str) -> tuple[float, str]:
    """``(amount, sku)`` of an order: from :data:`CATALOGUE`; for a soak order (``ORD-SOAK-0042``) or a backlog's
    (``ORD-BL-034-017``), an amount
    between $5.00 and $499.99 and a SKU from SKU-100 to SKU-999 (never the lessons' $49.99 and SKU-772), fixed by
    the id; for any other id, the lessons' :data:`AMOUNT` and :data:`SKU`."""
    if order_id in CATALOGUE:
        return CATALOGUE[order_id]
    if not re.fullmatch(rf"{SOAK_ORDER_PATTERN}|{BACKLOG_PATTERN}-\d{{3}}", order_id):
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
    for kind, verb in (("charge", "charged"), ("refund", "refunded")):
        for effect in effects.get(kind, []):
            value = effect.get("params", {}).get("amount")
            if not isinstance(value, (int, float)) or round(value * 100) != round(amount * 100):
                wrong.append(f"{verb} {value!r} instead of ${amount:.2f}")
    for kind, verb in (("reservation", "reserved"), ("release", "released")):
        for effect in effects.get(kind, []):
            value = effect.get("params", {}).get("sku")
            if value != sku:
                wrong.append(f"{verb} {value!r} instead of {sku}")
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


def undo_task(order_id: str = ORDER_ID) -> str:
    """A task that asks for a whole order to be undone (its charge, its reservation, then a cancellation). The
    world's model undoes it only when the request offers the undo tools (:data:`TOOLS_WITH_UNDO`)."""
    amount, sku = order_details(order_id)
    return (f"Undo order {order_id}: it was charged ${amount:.2f} and item {sku} was reserved. Release the item, "
            "refund the charge, then send a cancellation. Call exactly one tool per turn, in that order, and say "
            "that you are done once the order is undone.")


def undo_request(order_id: str = ORDER_ID) -> str:
    """A later user message asking to undo ``order_id``: the model undoes what the conversation shows was done."""
    return (f"The customer cancelled order {order_id}: undo every step that was done, in reverse order, one tool "
            "per turn, then send a cancellation.")


def check_failure(text: str) -> tuple[str, str]:
    """``TOOL``, ``TOOL:REASON`` or ``REASON`` (``reserve_item``, ``reserve_item:out_of_stock``, ``out_of_stock``)
    as ``(tool, reason)``; ValueError in one line otherwise."""
    tool, _, reason = str(text).strip().partition(":")
    by_reason = {r: t for t, reasons in FAILURE_REASONS.items() for r in reasons}
    if not reason and tool in by_reason:
        tool, reason = by_reason[tool], tool
    forms = ", ".join(f"{t}:{r}" for t, reasons in FAILURE_REASONS.items() for r in reasons)
    if tool not in FAILURE_REASONS:
        raise ValueError(f"no permanent failure for {text!r}: name a step that can fail for good ({forms})")
    reason = reason or next(iter(FAILURE_REASONS[tool]))
    if reason not in FAILURE_REASONS[tool]:
        raise ValueError(f"{tool} cannot fail with {reason!r}: it fails with {', '.join(FAILURE_REASONS[tool])}")
    return tool, reason


def failure_path(tool: str) -> tuple[list[str], list[str]]:
    """The steps an order runs when ``tool`` fails for good: ``(do, undo)`` -- the do steps up to and including
    the failing one, then the compensations of those that succeeded (:func:`undo_steps`)."""
    do = list(TOOL_ORDER[:TOOL_ORDER.index(tool) + 1])
    return do, undo_steps(do[:-1])


# At most this many characters: agents and engines name files, locks, workflows and keys after the order (a file
# name has at most 255 bytes, and an agent adds to the id), so a longer id would fail deep inside an engine.
MAX_ORDER_ID = 64


def is_order_id(text) -> bool:
    return isinstance(text, str) and len(text) <= MAX_ORDER_ID and re.fullmatch(ORDER_ID_PATTERN, text) is not None


def check_order_id(text: str) -> str:
    """``text`` if it is an order id; else a ValueError in one line. Every way in checks it (the CLI, the world, an
    agent's ``--order``): an id the world's pattern does not match (``ORD-77_C``) is read as another order's, so an
    agent that took it would charge ``ORD-77`` a second time."""
    if isinstance(text, str) and len(text) > MAX_ORDER_ID and re.fullmatch(ORDER_ID_PATTERN, text):
        raise ValueError(f"an order id has at most {MAX_ORDER_ID} characters, got one of {len(text)} "
                         f"({text[:20]}...): agents name files and workflows after it")
    if not is_order_id(text):
        shown = repr(text) if not isinstance(text, str) or len(text) <= 80 else repr(text[:60] + "...")
        raise ValueError(f"{shown} is not an order id: ORD- then letters or digits, such as ORD-8842 or ORD-77-B")
    return text


