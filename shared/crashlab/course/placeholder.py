"""What an unanswered exercise looks like, by the course's one rule: the student notebook puts ``# YOUR CODE HERE`` /
``raise NotImplementedError()`` where an answer goes (nbgrader's ``ClearSolutions``). The lessons' checks, the
self-check and the grader's judge all tell "not answered yet" from "answered wrong" by it."""

from __future__ import annotations

import os
import re
from pathlib import Path

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
    found = PLACEHOLDER.search(text)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        return f"{path.name} line {line} still has the placeholder `raise NotImplementedError()`"
    return None


def placeholder_raised(got: object) -> bool:
    """True when ``got`` says the learner's function still raises its placeholder's NotImplementedError: the
    exception itself, an ``{"error": "NotImplementedError..."}`` reply (at the top or in its ``value``), or a
    process's last words naming it."""
    if isinstance(got, NotImplementedError):
        return True
    if isinstance(got, dict):
        error = got.get("error")
        return (isinstance(error, str) and STUB in error) or placeholder_raised(got.get("value"))
    return isinstance(got, str) and STUB in got


__all__ = ["PLACEHOLDER", "STUB", "placeholder_raised", "unwritten"]
