"""What an unanswered exercise looks like, by the course's one rule: the student notebook puts ``# YOUR CODE HERE`` /
``raise NotImplementedError()`` where an answer goes (nbgrader's ``ClearSolutions``). The lessons' checks, the
self-check and the grader's judge and checks all tell "not answered yet" from "answered wrong" by it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from crashlab.plumbing.tracebacks import failure_words

STUB = "NotImplementedError"
PLACEHOLDER = re.compile(r"^[ \t]*# YOUR CODE HERE[ \t]*\n[ \t]*raise NotImplementedError\(\)", re.MULTILINE)


def unwritten(path: str | os.PathLike) -> str | None:
    """Why the answer file ``path`` is not written yet, or None: missing, or still holding the placeholder
    that the student notebook puts where an answer goes (``# YOUR CODE HERE`` / ``raise NotImplementedError()``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError:
        return f"{path.name} is not written yet"
    line = placeholder_line(text)
    return None if line is None else placeholder_words(path.name, line)


def placeholder_line(text: str) -> int | None:
    """The line of ``text`` that raises the student notebook's placeholder (as a traceback names it), or None."""
    found = PLACEHOLDER.search(text)
    return None if found is None else text.count("\n", 0, found.end()) + 1


def placeholder_words(name: str, line: int) -> str:
    return f"{name} line {line} still has the placeholder `raise NotImplementedError()`"


def process_words(got: object) -> str | None:
    """An agent run's (``run_agent``'s ProcessRun, or anything with its ``stderr`` and ``returncode``) failure in
    the learner's terms: ``exit code 1: NotImplementedError (keys.py, line 6)``; None for anything else."""
    stderr, code = getattr(got, "stderr", None), getattr(got, "returncode", None)
    if not isinstance(stderr, str) or not (code is None or isinstance(code, int)):
        return None
    return failure_words(stderr, code)


def placeholder_raised(got: object) -> bool:
    """True when ``got`` says the learner's function still raises its placeholder's NotImplementedError: the
    exception itself, an ``{"error": "NotImplementedError..."}`` reply (at the top or in its ``value``), or a
    process's last words (or the process run itself) naming it."""
    if isinstance(got, NotImplementedError):
        return True
    if isinstance(got, dict):
        error = got.get("error")
        return (isinstance(error, str) and STUB in error) or placeholder_raised(got.get("value"))
    words = process_words(got)
    if words is not None:
        return STUB in words
    return isinstance(got, str) and STUB in got


__all__ = ["PLACEHOLDER", "STUB", "placeholder_line", "placeholder_raised", "placeholder_words", "process_words",
           "unwritten"]
