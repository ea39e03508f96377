"""Lesson 1's loop, run from your own lesson 1 files: this copy of the course holds no answers to lesson 1.

Lesson 2's agents (and lesson 7's) build on lesson 1: they call ``run_logged_order(order_id, execute)``, the loop
that logs each decision before acting, with the tool call made their way (``execute(order_id, step, call)``, with
an idempotency key, a retry). In the self-paced course the library holds a copy of lesson 1's answers for that. In
your class's copy it does not -- you write them in ``course/01_naive_event_log.ipynb`` -- so this module runs your
own files from ``course/01_naive_event_log/``: ``order_log.py`` (exercise 1), ``replay.py`` (exercise 2) and
``logged_agent.py`` (exercise 3, whose ``run`` is the loop). Lesson 2 then runs on your lesson 1, as a course
that builds lesson on lesson would. (The grader does not: it grades lesson 2 on the course's own lesson 1, so a
mistake of lesson 1 costs lesson 1's points only.)

Written into a student release as ``crashlab/answers/lesson01.py`` by ``crashlab release`` when lesson 1 is
released to be answered; never imported in the self-paced course, which has the real module.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Callable

from crashlab.agent import AgentError, first_tool_use, state_dir
from crashlab.eventlog import OrderLocked, order_lock

YOUR_LESSON = Path(__file__).resolve().parents[3] / "course" / "01_naive_event_log"
FILES = ("order_log", "replay", "logged_agent")  # each imports the ones before it by their bare names

# execute(order_id, step, call) -> result; ``step`` counts tool calls of this order from 1, and ``call`` is the
# tool_use block: {"id", "name", "input"}.
Executor = Callable[[str, int, dict], dict]


class LessonOneNotReady(AgentError):
    """Your lesson 1 files are missing or still hold a placeholder."""


def not_ready() -> str | None:
    """Why your lesson 1 files cannot run yet, or None."""
    for name in FILES:
        path = YOUR_LESSON / f"{name}.py"
        if not path.is_file():
            return (f"course/01_naive_event_log/{name}.py is not written yet: run lesson 1's notebook (its "
                    "%%writefile cells) first")
        if "raise NotImplementedError()" in path.read_text():
            return f"course/01_naive_event_log/{name}.py still has its placeholder: finish lesson 1's exercises first"
    return None


def _your_modules() -> dict[str, ModuleType]:
    """Your lesson 1 files, loaded once under their own names (as lesson 1's notebook imports them)."""
    problem = not_ready()
    if problem:
        raise LessonOneNotReady(f"this agent runs your lesson 1 loop, and {problem}")
    for name in FILES:
        if name not in sys.modules or getattr(sys.modules[name], "__file__", None) != str(YOUR_LESSON / f"{name}.py"):
            spec = importlib.util.spec_from_file_location(name, YOUR_LESSON / f"{name}.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    return {name: sys.modules[name] for name in FILES}


def __getattr__(name: str):
    """``read_events`` and ``rebuild``: yours, from ``order_log.py`` and ``replay.py``."""
    if name == "read_events":
        return _your_modules()["order_log"].read_events
    if name == "rebuild":
        return _your_modules()["replay"].rebuild
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_logged_order(order_id: str, execute: Executor, *, max_turns: int = 10) -> str:
    """Run or resume ``order_id`` with your lesson 1 loop (``logged_agent.run``), each tool call made by
    ``execute`` instead of a plain ``call_tool``, the order's lock held (resumes started at once take turns).
    Returns the model's final text. ``max_turns``: your loop's own limit applies."""
    agent = _your_modules()["logged_agent"]
    log = state_dir() / f"{order_id}.jsonl"

    def call_tool(name: str, args: dict, **_ignored) -> dict:
        decisions = [e for e in agent.read_events(log) if e.get("type") == "decision"]
        call = first_tool_use(decisions[-1]["content"]) if decisions else None
        if call is None or call.get("name") != name or call.get("input") != args:
            call = {"id": "", "name": name, "input": args}  # a loop that acts before it logs: no logged call
        return execute(order_id, len(decisions), call)

    setattr(agent, "call_tool", call_tool)  # what your loop calls the tools with (it imported crashlab.agent's)
    with order_lock(state_dir() / f"{order_id}.lock"):
        try:
            agent.run(order_id)
        except NotImplementedError as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            if frames and Path(frames[-1].filename).resolve().parent == YOUR_LESSON:
                raise LessonOneNotReady(f"this agent runs your lesson 1 loop, and {Path(frames[-1].filename).name} "
                                        f"line {frames[-1].lineno} still raises NotImplementedError: finish lesson "
                                        "1 first") from None
            raise
        events = agent.read_events(log)
    final = events[-1] if events and events[-1].get("type") == "final" else None
    return final["content"][0]["text"] if final else ""


__all__ = ["Executor", "LessonOneNotReady", "OrderLocked", "not_ready", "order_lock", "run_logged_order"]
