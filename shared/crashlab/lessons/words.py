"""Words for a check that failed: what was expected and what came back.

A check that ends ``assert cond, value`` hands the learner a bare repr (``{'error': 'NotImplementedError: '}``)
and leaves them to guess what it should have been. :func:`expected_got` says both, bounded, and reads a value that
is still the exercise's placeholder (its ``NotImplementedError``, raised or sent back in an ``{"error": ...}``
reply) as what it is: an exercise not answered yet, not a wrong answer.
"""

from __future__ import annotations

import re

from crashlab.plumbing.tracebacks import cut_at_word

VISIBLE_CHECK = re.compile(r"#\s*Exercise (\d+): visible check")  # the first line of an exercise's visible checks
CELL_FILE = re.compile(r"ipykernel_\d+/\d+\.py$|^<ipython-input-")  # the file name IPython gives a cell's code

STUB = "NotImplementedError"
PLAIN = (str, bytes, dict, list, tuple, set, int, float, bool, type(None))
WIDTH = 300  # what a value may take of one message: enough to read a reply, never a page of it


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


def shown(got: object) -> str:
    """``got`` for a message: a string quoted, anything else as its repr (an audit's repr is already its words),
    cut after a whole word when long."""
    if isinstance(got, BaseException):
        text = f"{type(got).__name__}: {got}" if str(got) else type(got).__name__
    elif type(got) in PLAIN:
        text = repr(got)
    else:  # an object that says itself in words (an audit, a row's problems) is shown as it says itself
        text = str(got)
    return cut_at_word(text, WIDTH)


def expected_got(what: str, got: object) -> str:
    """``expected <what>, got <got>`` -- or, when ``got`` is the placeholder still raising, that the exercise is
    not answered yet."""
    if placeholder_raised(got):
        return f"expected {what}, got {STUB} from the placeholder: the exercise is not answered yet"
    return f"expected {what}, got {shown(got)}"


def stopped_before(status: str, code: int | None, last_words: str) -> str:
    """Why an agent that should have been waiting at ``status`` is not running: it finished the order without
    waiting (exit code 0), its placeholder still raises, or its own last words."""
    if code == 0:
        return (f"the agent finished (exit code 0) without the order ever reaching {status!r}: it must wait there "
                "before the charge")
    if placeholder_raised(last_words):
        return (f"the agent stopped (exit code {code}) before the order reached {status!r}: {STUB} from the "
                "placeholder: the exercise is not answered yet")
    return f"the agent exited (code {code}) before the order reached {status!r}: {last_words}"
