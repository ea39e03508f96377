"""Words for a check that failed: what was expected and what came back.

A check that ends ``assert cond, value`` hands the learner a bare repr (``{'error': 'NotImplementedError: '}``)
and leaves them to guess what it should have been. :func:`expected_got` says both, bounded, and reads a value that
is still the exercise's placeholder (its ``NotImplementedError``, raised, sent back in an ``{"error": ...}`` reply,
or the last words of an agent process) as what it is: an exercise not answered yet, not a wrong answer -- said
first, with the learner's file and line when the value tells them, and what the check expected after it.
"""

from __future__ import annotations

import re

from crashlab.course.placeholder import STUB, placeholder_raised, process_words
from crashlab.plumbing.tracebacks import cut_at_word, failure_words

VISIBLE_CHECK = re.compile(r"#\s*Exercise (\d+): visible check")  # the first line of an exercise's visible checks
CELL_FILE = re.compile(r"ipykernel_\d+/\d+\.py$|^<ipython-input-")  # the file name IPython gives a cell's code

PLAIN = (str, bytes, dict, list, tuple, set, int, float, bool, type(None))
WIDTH = 300  # what a value may take of one message: enough to read a reply, never a page of it


_WHERE = re.compile(r"\(([\w.-]+\.py), line (\d+)\)")


def where_raised(got: object) -> str:
    """`` (keys.py, line 6)``: the learner's file and line that raised, when ``got`` tells (an exception from the
    learner's process, a process run, words that name them); else the empty string."""
    where = getattr(got, "__where__", "")
    if isinstance(where, str) and where:
        return f" ({where})"
    text = process_words(got)
    if text is None and isinstance(got, dict):
        text = str(got.get("error") or "")
    if text is None:
        text = got if isinstance(got, str) else ""
    found = _WHERE.search(text)
    return f" ({found.group(1)}, line {found.group(2)})" if found else ""


def not_answered(what: str, got: object) -> str:
    """The placeholder still raising, said first: ``not answered yet: your code still raises NotImplementedError
    (keys.py, line 6), the placeholder's exception; the check expected ...``."""
    return f"not answered yet: your code still raises {STUB}{where_raised(got)}, the placeholder's exception; {what}"


def shown(got: object) -> str:
    """``got`` for a message: a string quoted, anything else as its repr (an audit's repr is already its words),
    cut after a whole word when long."""
    if isinstance(got, BaseException):
        text = f"{type(got).__name__}: {got}" if str(got) else type(got).__name__
    elif process_words(got) is not None:  # an agent run: how it ended, not its whole output
        text = str(process_words(got))
    elif type(got) in PLAIN:
        text = repr(got)
    else:  # an object that says itself in words (an audit, a row's problems) is shown as it says itself
        text = str(got)
    return cut_at_word(text, WIDTH)


def expected_got(what: str, got: object) -> str:
    """``expected <what>, got <got>`` -- or, when ``got`` is the placeholder still raising, that the exercise is
    not answered yet."""
    if placeholder_raised(got):
        return not_answered(f"the check expected {what}", got)
    return f"expected {what}, got {shown(got)}"


def stopped_before(status: str, code: int | None, stderr: str) -> str:
    """Why an agent that should have been waiting at ``status`` is not running: it finished the order without
    waiting (exit code 0), its placeholder still raises (said first), or how it failed (``stderr``: what it
    printed there, read for its last words and the learner's line that raised)."""
    if code == 0:
        return (f"the agent finished (exit code 0) without the order ever reaching {status!r}: it must wait there "
                "before the charge")
    words = failure_words(stderr, code)
    if placeholder_raised(words):
        return not_answered(f"the agent stopped (exit code {code}) before the order reached {status!r}", words)
    return f"the agent exited before the order reached {status!r}: {cut_at_word(words, WIDTH)}"
