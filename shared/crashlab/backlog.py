"""The long task: a backlog of orders, worked through one tool call per turn.

A backlog id names its size: ``ORD-BL-034`` is 34 orders, ``ORD-BL-034-001`` to ``ORD-BL-034-034``; an optional tag
(a letter, then letters or digits) keeps two backlogs of one size apart: ``ORD-BL-034-B`` has the orders
``ORD-BL-034-B-001`` ... Both are order ids as the rest of the course knows them (:data:`crashlab.order.ORDER_ID_PATTERN`),
so the world arms crash points and audits by them, and an agent takes one as its ``--order``.

Each order of a backlog is the lesson order's three steps -- charge, reserve, confirm -- with its own amount and SKU,
derived from the order id's SHA-256 (:func:`crashlab.order.order_details`: never the lessons' $49.99 and SKU-772), so
every process agrees on them and the world's per-order ledgers, keys and audit work unchanged. A backlog of N orders
is :func:`plan`: 3N tool turns, then one final answer -- 3N + 1 model calls when nothing is compacted.

Why the long task is built this way: the durable record of an agent grows with its conversation, and the lessons
measure that growth. The world's scripted model reads progress from the conversation alone (the tool calls that got
a successful result, and any :func:`progress_line` a compaction left), so a resumed or compacted conversation gets the
right next step, and a compaction that forgets progress makes the model redo orders -- as a real model would. An
agent compacts by asking :data:`SUMMARY_ASK` with no tools offered; the model answers the progress line, which the
agent carries into its new, shorter conversation.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from crashlab.order import BACKLOG_PATTERN, TOOL_ORDER, order_details, order_task

TURNS_PER_ORDER = len(TOOL_ORDER)  # charge, reserve, confirm: one tool call per turn
# What an agent sends (in a user message, with no tools offered) to have the model summarise the progress.
SUMMARY_ASK = "Summarise the progress of the backlog so far, in one line."
PROGRESS_PATTERN = rf"\[progress ({BACKLOG_PATTERN})\] (\d+) of (\d+) steps done"


class Step(NamedTuple):
    """One tool turn of a backlog: ``tool`` for ``order_id``."""

    order_id: str
    tool: str


def backlog_id(size: int, tag: str | None = None) -> str:
    """The id of a backlog of ``size`` orders (1 to 999): ``backlog_id(34)`` is ``ORD-BL-034``, ``backlog_id(34, "B")``
    is ``ORD-BL-034-B``."""
    if not (type(size) is int and 1 <= size <= 999):
        raise ValueError(f"a backlog has 1 to 999 orders, got {size!r}")
    text = f"ORD-BL-{size:03d}" + (f"-{tag}" if tag else "")
    if not is_backlog(text):
        raise ValueError(f"a backlog's tag is a capital letter, then capitals or digits (such as B or RUN2), got {tag!r}")
    return text


def is_backlog(text: object) -> bool:
    """Whether ``text`` is a backlog id (``ORD-BL-034``, ``ORD-BL-034-B``), not one of its orders."""
    found = re.fullmatch(BACKLOG_PATTERN, text) if isinstance(text, str) else None
    return found is not None and int(found.group(1)) >= 1


def check_backlog(text: object) -> str:
    """``text`` if it is a backlog id; a one-line ValueError otherwise."""
    if not is_backlog(text):
        raise ValueError(f"{text!r} is not a backlog id: ORD-BL-, then its number of orders (1 to 999), and an "
                         "optional tag, such as ORD-BL-034 or ORD-BL-034-B")
    return str(text)


def backlog_size(backlog: str) -> int:
    """How many orders the backlog has: ``ORD-BL-034`` has 34."""
    found = re.fullmatch(BACKLOG_PATTERN, check_backlog(backlog))
    assert found is not None  # checked just now
    return int(found.group(1))


def backlog_orders(backlog: str) -> list[str]:
    """The backlog's orders, in the order the task asks for them: ``ORD-BL-003-001``, ``-002``, ``-003``."""
    return [f"{backlog}-{i:03d}" for i in range(1, backlog_size(backlog) + 1)]


def backlog_of(order_id: object) -> str | None:
    """The backlog an order belongs to (``ORD-BL-034-017`` -> ``ORD-BL-034``), or None for any other id (a backlog id
    itself included). An order past the backlog's size (``ORD-BL-003-004``) belongs to none."""
    if not isinstance(order_id, str):
        return None
    found = re.fullmatch(rf"({BACKLOG_PATTERN})-(\d{{3}})", order_id)
    if found is None or not 1 <= int(found.group(3)) <= int(found.group(2)):  # ORD-BL-003-004 is no order of it
        return None
    return found.group(1)


def plan(backlog: str) -> list[Step]:
    """Every tool turn of the backlog, in order: each order's charge, reservation and confirmation, order by order."""
    return [Step(order, tool) for order in backlog_orders(backlog) for tool in TOOL_ORDER]


def backlog_turns(backlog: str) -> int:
    """The backlog's tool turns: three per order."""
    return backlog_size(backlog) * TURNS_PER_ORDER


def step_input(step: Step) -> dict:
    """The tool input of one step, as the model writes it: the order id, and the order's own amount or SKU."""
    amount, sku = order_details(step.order_id)
    extra: dict[str, dict[str, float | str]] = {"charge_card": {"amount": amount}, "reserve_item": {"sku": sku}}
    return {"order_id": step.order_id, **extra.get(step.tool, {})}


def backlog_task(backlog: str) -> str:
    """The user's request that starts a backlog's conversation (it names the backlog: the world's model reads it)."""
    orders = backlog_orders(backlog)
    return (f"Work through backlog {backlog}: {len(orders)} orders, {orders[0]} to {orders[-1]}. For each order in "
            "turn, charge the card the order's amount, reserve its item, then send its confirmation. Call exactly one "
            "tool per turn and say that you are done once every order is complete.")


def task_for(order_id: str) -> str:
    """The task that starts a conversation for ``order_id``: :func:`backlog_task` for a backlog, else the lesson
    order's (:func:`crashlab.order.order_task`). An agent that takes either kind of id calls this."""
    return backlog_task(order_id) if is_backlog(order_id) else order_task(order_id)


def progress_line(backlog: str, done: int) -> str:
    """What the model answers when asked to summarise, and what a compacted conversation carries on:
    ``[progress ORD-BL-034] 53 of 102 steps done``."""
    turns = backlog_turns(backlog)
    if not (type(done) is int and 0 <= done <= turns):
        raise ValueError(f"{backlog} has {turns} steps: done is 0 to {turns}, got {done!r}")
    return f"[progress {backlog}] {done} of {turns} steps done"


def progress_in(text: str, backlog: str) -> int | None:
    """The most steps done that a :func:`progress_line` of ``backlog`` in ``text`` reports, or None if there is none."""
    found = [int(m.group(3)) for m in re.finditer(PROGRESS_PATTERN, text) if m.group(1) == backlog]
    return max(found) if found else None


def named_backlog(text: str) -> str | None:
    """The backlog a task names (``Work through backlog ORD-BL-034: ...``), or None."""
    found = re.search(rf"\bbacklog ({BACKLOG_PATTERN})(?![A-Za-z0-9-])", text)
    return found.group(1) if found else None


__all__ = ["BACKLOG_PATTERN", "PROGRESS_PATTERN", "SUMMARY_ASK", "TURNS_PER_ORDER", "Step", "backlog_id", "backlog_of",
           "backlog_orders", "backlog_size", "backlog_task", "backlog_turns", "check_backlog", "is_backlog",
           "named_backlog", "plan", "progress_in", "progress_line", "step_input", "task_for"]
