"""Every feedback message the suite's own gradings produce is checked as it is produced, at no extra cost.

The known-wrong answers, the stubs and the cheats in tests/lessons/ and tests/grading/ already go through the grader
(``grade_notebook``, ``judge_checks``, ``score_matrix_check``); :func:`install` wraps those three so that each
outermost call hands its results' feedback to :func:`feedback_problems`, and the test that produced a message fails
(at its teardown, naming the message) when the message shows the grader's internals, is empty, says an exception
with nothing after its colon, was cut in the middle of something, or is a failed check's bare value (a repr with no
words saying what was expected). No grading is added: only those that run
anyway are read. Gradings made by a subprocess (the command line, the bundle, a batch) are not seen here.
"""

from __future__ import annotations

import functools
import re
import threading

# The grader's folders and modules, importlib's frames, the library's own files: none of them is the student's; nor
# are the grader's words for its own machinery (a check's probe, the reference answers, whether a run was isolated).
INTERNALS = re.compile(r"/tmp/crashlab-|crashlab-(grade|rows|private)-|site-packages|shared/crashlab|"
                       r"_notebook_answers\.py|<frozen |_bootstrap|\bsubject\.py|\bjudge\.py|"
                       r"\bprobes?\b|reference answers|\bisolated\b", re.IGNORECASE)
# ``NotImplementedError:`` with nothing after it: an exception named and its message left empty.
EMPTY_EXCEPTION = re.compile(r"\b[A-Z]\w*(Error|Exception):\s*($|[)\]]|\([\w.-]+\.py, line \d+\))", re.MULTILINE)
CUT_MARK = "[...]"  # how a bounded message says it was cut (crashlab.plumbing.tracebacks.cut_at_word)
PAIRS = ("()", "{}", "[]")
# A quotation, not an apostrophe: "the winner's result" opens nothing.
QUOTED = re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|\"[^\"\n]*\"")

# A failed check's own message, after the words the judge puts before it: "check failed (requirement [R1] ...): ".
CHECK_MESSAGE = re.compile(r"^check failed(?: \((?:[^()]|\([^()]*\))*\))?: ")
# A message that is only a value: a dict, list, tuple, string, number, an object's repr (``Audit(...)``, ``<...>``).
BARE_VALUE = re.compile(r"""^(?:[{\[(<'"]|-?\d[\d.e+-]*$|[A-Z]\w*\()""")

_produced: list[str] = []
_depth = threading.local()


def feedback_problems(output: str) -> list[str]:
    """What is wrong with one check's feedback, in words; [] when nothing is."""
    if not output.strip():
        return ["an exercise with no feedback at all"]
    problems = []
    found = INTERNALS.search(output)
    if found:
        problems.append(f"a grader internal ({found.group(0)!r})")
    prefix = CHECK_MESSAGE.match(output)
    if prefix and BARE_VALUE.match(output[prefix.end():].strip()):
        problems.append(f"a check's message that is only a value, with no words: {output[prefix.end():][:80]!r}")
    found = EMPTY_EXCEPTION.search(output)
    if found:
        problems.append(f"an exception with an empty message ({found.group(0).strip()!r})")
    for line in output.splitlines():
        if CUT_MARK in line:
            continue  # cut after a whole word, and marked as cut
        line = QUOTED.sub("", line)  # a quoted '(' is a character named, not a pair opened
        for opening, closing in PAIRS:
            if line.count(opening) != line.count(closing):
                problems.append(f"cut in the middle of a {opening}{closing} pair: {line.strip()!r}")
                break
        if line.count("`") % 2:
            problems.append(f"cut in the middle of a `quoted` name: {line.strip()!r}")
    return problems


def _outputs(result) -> list[str]:
    tests = getattr(result, "tests", None)
    if tests is not None:  # a GradeReport
        return [t.output for t in tests]
    if isinstance(result, list):  # judge_checks
        return [t.output for t in result]
    return [result.output]  # one TestResult


def _recording(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        _depth.value = getattr(_depth, "value", 0) + 1
        try:
            result = function(*args, **kwargs)
        finally:
            _depth.value -= 1
        if _depth.value == 0:  # a grading's inner calls are read once, as the grading's own results
            _produced.extend(_outputs(result))
        return result

    wrapper.__wrapped_by_feedback_guard__ = True
    return wrapper


def install() -> None:
    """Wrap the grader's entry points where the tests import them from (before any test module imports them)."""
    from crashlab.grading import checks, grade

    for module, name in ((checks, "judge_checks"), (checks, "score_matrix_check"), (grade, "judge_checks"),
                         (grade, "score_matrix_check"), (grade, "grade_notebook")):
        function = getattr(module, name)
        if not getattr(function, "__wrapped_by_feedback_guard__", False):
            setattr(module, name, _recording(function))


def take_produced() -> list[str]:
    """The feedback produced since the last call."""
    produced = list(_produced)
    _produced.clear()
    return produced
