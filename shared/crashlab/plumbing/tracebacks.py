"""A failure told in the student's own terms: the exception and the line of *their* file that raised it.

A traceback is mostly the machinery around the student's code -- the launcher that ran the agent, ``runpy``,
importlib's ``<frozen ...>`` frames, the grader's subject process. Quoted whole (or its last 500 characters,
cut wherever they start) it sends the learner looking in files they never wrote. These helpers keep the frames
of the student's files and the exception's own line.
"""

from __future__ import annotations

import functools
import os
import re
import sys

from crashlab.plumbing import LIBRARY

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


@functools.cache
def _outside() -> tuple[str, ...]:
    return tuple(os.path.join(os.path.abspath(p), "") for p in
                 {sys.prefix, sys.base_prefix, sys.exec_prefix, str(LIBRARY)})


def is_students_file(filename: str) -> bool:
    """Whether a frame's file is the student's: not frozen, not Python's, not an installed package's, not the
    course library's."""
    return not filename.startswith("<frozen") and not os.path.abspath(filename).startswith(_outside())


def failure_words(stderr: str, returncode: int | None = None) -> str:
    """``exit code 1: NotImplementedError (order_agent.py, line 11)`` from a process's stderr: its last line
    that is not part of a traceback's frames, and the last frame in a file of the student's."""
    lines = [line.rstrip() for line in (stderr or "").splitlines() if line.strip()]
    where = ""
    for number, line in enumerate(lines):
        frame = _FRAME.match(line)
        if frame and is_students_file(frame["file"]):
            where = f"{os.path.basename(frame['file'])}, line {frame['line']}"
    said = next((line.strip() for line in reversed(lines) if not line.startswith(" ")), "")
    said = said if not said.endswith(":") else said[:-1]
    head = f"exit code {returncode}" if returncode is not None else "it failed"
    return head + (f": {said}" if said else "") + (f" ({where})" if where else "")


def cut_at_word(text: str, width: int, placeholder: str = " [...]") -> str:
    """``text`` bounded at ``width`` characters, cut after a whole word and marked with ``placeholder``: a message
    cut mid-token (``Os { code: 11``) reads as a different error. Unlike :func:`textwrap.shorten` it keeps the
    text's own line breaks, so a multi-line verdict stays one item a line."""
    text = str(text)
    if len(text) <= width:
        return text
    room = max(0, width - len(placeholder))
    cut = max(text.rfind(" ", 0, room + 1), text.rfind("\n", 0, room + 1))
    return (text[:cut] if cut > 0 else text[:room]).rstrip() + placeholder


__all__ = ["is_students_file", "failure_words", "cut_at_word"]
