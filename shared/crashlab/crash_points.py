"""The crash-point vocabulary, in one place: what a crash point is (``before:OP`` or ``after:OP``, OP being the
Nth model call ``model#N`` or a tool of the order), how it is written and read, which points a run passes
through, and the one rule every verdict, table and picture applies to them.

The rule: at ``after:model#N`` the model's answer was computed and logged by the world, then the process died
before it could record it. The resumed run has no record of that answer and asks again -- one repeated model
call that no engine can avoid, since no engine can record an answer it never received. Everywhere else a
repeated model call is an engine's (or an agent's) failure to resume the conversation.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from crashlab.order import ALL_TOOLS, TOOL_ORDER, UNDO_TOOLS, failure_path

WHENS = ("before", "after")
MODEL = "model#"
FORMS = f"before:OP or after:OP, OP = model#N (N >= 1) or a tool: {', '.join(TOOL_ORDER)}"
FORMS_WITH_UNDO = f"{FORMS} (with --fail, also an undo step: {', '.join(UNDO_TOOLS)})"
# How the rule reads in a verdict, a legend or a table's key.
ALLOWED_REPEAT = "one at after:model#N"


class CrashPoint(NamedTuple):
    """``when`` is ``before`` or ``after``; ``op`` is ``model#N`` or a tool name."""

    when: str
    op: str

    @classmethod
    def parse(cls, text: str) -> "CrashPoint":
        """``text`` as a crash point, normalised; a one-line ValueError saying what is wrong otherwise. A point no
        run can reach (a tool that does not exist) is refused here rather than reported as "never reached" after a
        whole run. The undo tools are tools of the order too."""
        when, colon, op = (part.strip() for part in str(text).partition(":"))
        every = f"before:OP or after:OP, OP = model#N (N >= 1) or a tool: {', '.join(ALL_TOOLS)}"
        if when not in WHENS or not colon:
            raise ValueError(f"crash point {text!r} is not {every}")
        model = re.fullmatch(r"model#(\d+)", op)
        if model:
            if int(model.group(1)) < 1:
                raise ValueError(f"crash point {text!r}: model calls are counted from 1 (model#1 is the first)")
            return cls(when, f"{MODEL}{int(model.group(1))}")
        if op not in ALL_TOOLS:
            close = difflib.get_close_matches(op, list(ALL_TOOLS), n=1)
            hint = f"did you mean {when}:{close[0]}? " if close else ""
            raise ValueError(f"crash point {text!r}: unknown tool {op!r}: {hint}OP is model#N or one of "
                             f"{', '.join(ALL_TOOLS)}")
        return cls(when, op)

    def __str__(self) -> str:
        return f"{self.when}:{self.op}"

    @property
    def is_model_call(self) -> bool:
        return self.op.startswith(MODEL)


def check_crash_point(text: str) -> str:
    """``text`` as a crash point in its written form (see :meth:`CrashPoint.parse`)."""
    return str(CrashPoint.parse(text))


def allowed_repeats(point: str) -> int:
    """How many repeated model calls a correct agent may show when killed at ``point``: one at ``after:model#N``
    (the answer died in flight, see the module's docstring), none anywhere else (the baseline row too)."""
    return 1 if str(point).startswith(f"after:{MODEL}") else 0


def default_points(model_calls: int = len(TOOL_ORDER) + 1) -> list[str]:
    """Every crash point a correct run of the order task passes through, in order: four model calls (one per
    tool, then the final answer) and three tool calls."""
    points: list[str] = []
    for n in range(1, model_calls + 1):
        points += [f"before:{MODEL}{n}", f"after:{MODEL}{n}"]
        if n <= len(TOOL_ORDER):
            tool = TOOL_ORDER[n - 1]
            points += [f"before:{tool}", f"after:{tool}"]
    return points


def failure_points(tool: str) -> list[str]:
    """Every crash point of the failure path when ``tool`` fails for good: the model calls that choose the do
    steps, every do step (the failing one too: its ``after:`` is once the world has answered the failure) and
    every undo step. No model call after the failure: code that owns the compensation asks the model nothing."""
    do, undo = failure_path(tool)
    points = default_points(len(do))
    for step in undo:
        points += [f"before:{step}", f"after:{step}"]
    return points


def check_on_path(point: str, failing: str | None = None) -> str:
    """``point`` in its written form if a run can pass through it: a model call, or a tool the order calls -- on
    the do path, or with ``failing`` (the tool that fails for good) on that failure path. A one-line ValueError
    otherwise, before any run: a point off the path would only come back as "never reached" after the whole row."""
    crash = CrashPoint.parse(point)
    if crash.is_model_call:
        return str(crash)
    do, undo = failure_path(failing) if failing else (list(TOOL_ORDER), [])
    if crash.op in do or crash.op in undo:
        return str(crash)
    if failing is None:
        raise ValueError(f"crash point {point!r}: {crash.op} is an undo step, called only when a step fails for "
                         f"good: give the failure too (--fail STEP, or fail= in Python; such as reserve_item)")
    raise ValueError(f"crash point {point!r}: when {failing} fails for good the order calls {', '.join(do)}, then "
                     f"{', '.join(undo)}: {crash.op} is never called")


__all__ = ["ALLOWED_REPEAT", "FORMS", "FORMS_WITH_UNDO", "CrashPoint", "allowed_repeats", "check_crash_point", "check_on_path",
           "default_points", "failure_points"]
