"""Lesson 1's answers -- reading the log, rebuilding the conversation, and the logged agent loop with
the tool call left open -- so later lessons plug in how a tool is executed (with an idempotency key, a
retry, a ledger) without copying the loop.

It also takes the order's lock (:func:`crashlab.eventlog.order_lock`), so that resume processes started at once
take turns instead of racing: the first one finishes the order, the others find it finished in the log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, AgentError, content_to_dicts, first_tool_use, model_client,
                            order_task, state_dir, tool_result_message)
from crashlab.answers import refuse_while_grading
from crashlab.eventlog import CorruptLogError, OrderLocked, append_event, order_lock

refuse_while_grading("01")


# What each kind of record of the order's log holds, as the loop below writes it. A line that parses but lacks these
# is damage too (an edit by hand, another program's file under the log's name): the loop would stop on a KeyError.
FIELDS: dict[str, dict[str, type]] = {"decision": {"content": list}, "result": {"tool_use_id": str, "result": object},
                                      "final": {"content": list}}


def _record_problem(event: dict) -> str | None:
    fields = FIELDS.get(str(event.get("type")))
    if fields is None:
        return f"has no known type (a decision, a result or a final answer), got {str(event.get('type'))[:40]!r}"
    missing = [name for name, kind in fields.items() if not (name in event and isinstance(event[name], kind))]
    if missing:
        return f"is a {event['type']} record without its {' and '.join(missing)}"
    if event["type"] == "final" and not (event["content"] and isinstance(event["content"][0], dict)
                                         and isinstance(event["content"][0].get("text"), str)):
        return "is a final answer without its text"
    return None


def read_events(path: str | os.PathLike) -> list[dict]:
    """Every complete event in the log; a torn last line is dropped, damage elsewhere raises."""
    path = Path(path)
    if path.is_dir():
        raise CorruptLogError(f"{path} is a folder, not an event log: move it aside")
    if not path.exists():
        return []
    *complete, _torn_tail = path.read_bytes().split(b"\n")
    events = []
    for number, raw in enumerate(complete, start=1):
        try:
            event = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptLogError(f"{path}: line {number} is damaged ({exc})") from None
        if not isinstance(event, dict):
            raise CorruptLogError(f"{path}: line {number} is not a JSON object")
        events.append(event)
    return events


def read_order_log(path: Path) -> list[dict]:
    """:func:`read_events` of the loop's own log, each record checked to be one the loop writes (other logs, such
    as a saga's undo journal, keep records of their own)."""
    events = read_events(path)
    for number, event in enumerate(events, start=1):
        problem = _record_problem(event)
        if problem:
            raise CorruptLogError(f"{path}: line {number} {problem}")
    return events


def rebuild(task: str, events: list[dict]) -> tuple[list[dict], dict | None]:
    """The conversation so far, and the decided-but-not-yet-run tool call (or None). No model call."""
    messages = [{"role": "user", "content": task}]
    pending = None
    for event in events:
        if event["type"] == "decision":
            messages.append({"role": "assistant", "content": event["content"]})
            pending = first_tool_use(event["content"])
        elif event["type"] == "result":
            messages.append(tool_result_message(event["tool_use_id"], event["result"]))
            pending = None
    return messages, pending


# execute(order_id, step, call) -> result; ``step`` counts tool calls of this order from 1, and
# ``call`` is the tool_use block: {"id", "name", "input"}.
Executor = Callable[[str, int, dict], dict]


def run_logged_order(order_id: str, execute: Executor, *, max_turns: int = 10) -> str:
    """Run or resume ``order_id``: decisions are logged before acting, results after. Returns the
    model's final text."""
    folder = state_dir()
    log = folder / f"{order_id}.jsonl"
    with order_lock(folder / f"{order_id}.lock"):
        events = read_order_log(log)
        if events and events[-1]["type"] == "final":
            text = events[-1]["content"][0]["text"]
            print(f"[done earlier] {text}")
            return text
        messages, pending = rebuild(order_task(order_id), events)
        step = sum(1 for e in events if e["type"] == "decision")
        if events:
            print(f"[resume] rebuilt {len(events)} event(s) from the log without asking the model")
        client = model_client()
        for _ in range(max_turns):
            if pending is None:
                reply = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
                content = content_to_dicts(reply.content)
                if reply.stop_reason != "tool_use":
                    append_event(log, {"type": "final", "content": content})
                    print(f"[done] {content[0]['text']}")
                    return content[0]["text"]
                append_event(log, {"type": "decision", "content": content})
                messages.append({"role": "assistant", "content": content})
                pending = first_tool_use(content)
                step += 1
                if pending is None:  # a reply that stops for a tool names one: the SDK says so
                    raise AgentError(f"{order_id}: the model stopped for a tool but named none")
            result = execute(order_id, step, pending)
            append_event(log, {"type": "result", "tool_use_id": pending["id"], "result": result})
            messages.append(tool_result_message(pending["id"], result))
            pending = None
        raise AgentError(f"{order_id}: gave up after {max_turns} turns")


__all__ = ["Executor", "OrderLocked", "order_lock", "read_events", "read_order_log", "rebuild",
           "run_logged_order"]
