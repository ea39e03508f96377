"""What a lesson notebook's kernel needs to behave well for a learner who has not finished yet.

* :func:`work_in_lesson_folder` -- the agents, modules and worlds a lesson writes go into a folder of
  their own, so the file browser shows six lessons rather than forty loose files.
* :func:`needs_exercise` -- a demonstration that runs the learner's code says in one line which
  exercise to finish first, instead of waiting minutes on an agent that cannot work and ending in an
  engine's traceback. It trusts the exercise's own visible checks: an exercise is ready once the cell
  starting ``# Exercise N: visible check`` has run without an error in this kernel.
* The visible checks themselves answer in one line: that they passed, that the exercise is not answered
  yet (its placeholder still raises ``NotImplementedError``), or what a failed check says -- never a
  traceback through the helpers between the cell and the learner's code, and never silence on success.
"""

from __future__ import annotations

import linecache
import os
import re
import traceback
from pathlib import Path

from crashlab.answers import ENV_GRADING_LESSON

VISIBLE_CHECK = re.compile(r"#\s*Exercise (\d+): visible check")

_checks_passed: dict[int, bool] = {}  # exercise -> did its visible checks pass the last time they ran
_home: Path | None = None


class FinishExerciseFirst(Exception):
    """A demonstration skipped because the exercise it runs is not done. IPython shows the one line that
    ``_render_traceback_`` returns instead of a traceback: nothing went wrong, the learner is not there yet."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def needs_exercise(*numbers: int, written: str | os.PathLike | None = None) -> None:
    """The first line of a cell that runs the learner's answers to these exercises.

    An exercise whose visible checks passed in this kernel is ready; one whose checks failed is not. One
    whose checks have not run yet (a demonstration placed before them) is judged by ``written``, the file
    its answer goes into: ready unless the file is missing or still holds the exercise's placeholder."""
    for n in numbers:
        passed = _checks_passed.get(n)
        if passed:
            continue
        if passed is False:
            raise FinishExerciseFirst(f"skipped: this cell runs your answer to exercise {n}, whose visible checks above "
                                      f"did not pass yet. Fix exercise {n}, run its checks again, then this cell.")
        if written is None:
            raise FinishExerciseFirst(f"skipped: this cell runs your answer to exercise {n}. Finish exercise {n} and run "
                                      f"its visible checks above (the cell '# Exercise {n}: visible checks'), then this cell.")
        problem = unwritten(written)
        if problem:
            raise FinishExerciseFirst(f"skipped: this cell runs your answer to exercise {n}, and {problem}. "
                                      f"Finish exercise {n} (run its %%writefile cell), then this cell.")


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


def note_visible_checks(result) -> None:
    """IPython ``post_run_cell`` hook: remember whether each exercise's visible checks passed, and say so when
    they did (no output at all is a poor sign of success)."""
    cell = (getattr(result.info, "raw_cell", None) or "").lstrip()
    found = VISIBLE_CHECK.match(cell)
    if found:
        _checks_passed[int(found.group(1))] = bool(result.success)
        if result.success:
            print(f"exercise {found.group(1)}: the visible checks passed (grading also runs hidden checks)")


def watch_visible_checks() -> bool:
    """Register :func:`note_visible_checks` once in this IPython kernel; False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    if not getattr(shell, "_crashlab_watches_checks", False):
        shell.events.register("post_run_cell", note_visible_checks)
        shell.set_custom_exc((AssertionError, NotImplementedError), short_assertion)
        shell._crashlab_watches_checks = True
    return True


CELL_FILE = re.compile(r"ipykernel_\d+/\d+\.py$|^<ipython-input-")


def short_assertion(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """How IPython shows an AssertionError in a lesson: a failed check says what is wrong in its message,
    so show that and the cell's line that failed -- not the frames of the helpers in between. A
    ``NotImplementedError`` in an exercise's visible checks is an exercise not answered yet, said in one line;
    anywhere else it keeps its whole traceback."""
    frames = list(traceback.walk_tb(tb))
    failed = next(((frame.f_code.co_filename, lineno) for frame, lineno in frames
                   if CELL_FILE.search(frame.f_code.co_filename)), None)  # the cell that ran, not a helper's
    check = VISIBLE_CHECK.match(linecache.getline(failed[0], 1).strip()) if failed else None
    if issubclass(etype, NotImplementedError):
        if check is None:
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
            return []
        raiser = frames[-1][0].f_code.co_name if frames else ""
        what = f"`{raiser}` raises NotImplementedError" if raiser and raiser != "<module>" else \
            "its placeholder still raises NotImplementedError"
        lines = [f"exercise {check.group(1)} not answered yet: {what}" + (f" ({value})" if str(value) else "")]
        shell._showtraceback(etype, value, lines)
        return lines
    lines = [f"{etype.__name__}: {value}"]
    if failed:
        code = linecache.getline(*failed).strip()
        where = f"exercise {check.group(1)}'s visible checks, " if check else ""
        if code:
            lines.append(f"  ({where}the cell's line {failed[1]}: {code})")
    shell._showtraceback(etype, value, lines)
    return lines


def work_in_lesson_folder(name: str) -> None:
    """Make ``name/`` beside the notebook the kernel's working directory (idempotent: run the cell again
    and nothing moves). While grading, the grader's scratch folder already is the lesson's own: no move."""
    global _home
    if os.environ.get(ENV_GRADING_LESSON):
        return
    if _home is None:
        _home = Path.cwd()
    folder = _home / name
    folder.mkdir(exist_ok=True)
    os.chdir(folder)
    print(f"the files this lesson writes (agents, worlds) go into {name}/, beside this notebook")


watch_visible_checks()  # in a lesson kernel, from the first import on
