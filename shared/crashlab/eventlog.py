"""The event log of lesson 1, as a library piece the later lessons build on.

One JSON object per line, appended and fsynced. A record exists once its newline is on disk: the
unterminated tail a crash leaves behind is dropped, and damage before the last line is an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from crashlab.agent import first_tool_use, tool_result_message


class CorruptLogError(RuntimeError):
    """A complete line of the log cannot be read: the log was damaged, not merely cut short."""


def append_event(path: str | os.PathLike, event: dict) -> None:
    """Append one event as one line and fsync it; cut off a torn tail first so nothing glues onto it."""
    line = (json.dumps(event, ensure_ascii=False) + "\n").encode("utf-8")
    with open(path, "ab+") as f:
        size = f.seek(0, os.SEEK_END)
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.seek(0)
                f.truncate(f.read().rfind(b"\n") + 1)
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_events(path: str | os.PathLike) -> list[dict]:
    """Every complete event in the log; a torn last line is dropped, damage elsewhere raises."""
    path = Path(path)
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
