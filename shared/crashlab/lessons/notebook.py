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
* A visible check sees the answer as it stands now: before one runs, every module the lesson wrote into its
  folder is forgotten, so the check's ``import`` reads the file again. Run before answering (as the README
  invites), a check would otherwise keep the placeholder it imported then, until the kernel restarts.
"""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import os
import sys
import traceback
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.answers import ENV_GRADING_LESSON
from crashlab.course.placeholder import placeholder_line, unwritten

from crashlab.lessons.words import CELL_FILE, VISIBLE_CHECK

_checks_passed: dict[int, bool] = {}  # exercise -> did its visible checks pass the last time they ran
_home: Path | None = None


class FinishExerciseFirst(CrashlabError):
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


def lesson_modules(folder: str | os.PathLike | None = None) -> list[str]:
    """The imported modules whose file lies in ``folder`` itself (the working directory: the lesson's folder): the
    ones the learner writes there with ``%%writefile``. Not below it: the course's library is never one."""
    root = Path(folder or os.getcwd()).resolve()
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        try:
            if Path(file).resolve().parent == root:
                found.append(name)
        except OSError:
            continue
    return found


def forget_lesson_modules(folder: str | os.PathLike | None = None) -> list[str]:
    """Forget every module the lesson wrote (see :func:`lesson_modules`), with its compiled copy, so that the next
    ``import`` reads the file as it is now: a ``.pyc`` is trusted while the source's size and whole-second
    modification time match, which an answer written in the same second as the placeholder's import can."""
    names = lesson_modules(folder)
    for name in names:
        file = getattr(sys.modules.pop(name, None), "__file__", None)
        if not file:
            continue
        try:
            Path(importlib.util.cache_from_source(file)).unlink(missing_ok=True)
        except (OSError, NotImplementedError, ValueError):
            pass
    if names:
        importlib.invalidate_caches()
    return names


def fresh_before_visible_checks(info) -> None:
    """IPython ``pre_run_cell`` hook: a visible check starts with the lesson's modules forgotten."""
    if VISIBLE_CHECK.match((getattr(info, "raw_cell", None) or "").lstrip()):
        forget_lesson_modules()


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
    """Register :func:`fresh_before_visible_checks` and :func:`note_visible_checks` once in this IPython kernel;
    False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    if not getattr(shell, "_crashlab_watches_checks", False):
        shell.events.register("pre_run_cell", fresh_before_visible_checks)
        shell.events.register("post_run_cell", note_visible_checks)
        shell.set_custom_exc((AssertionError, NotImplementedError), short_assertion)
        from crashlab.lessons.heartbeat import install

        install(shell)  # a cell that waits says so, each few seconds
        shell._crashlab_watches_checks = True
    return True


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
        if check is None and failed and _raised_by_placeholder(frames, failed):
            lines = [NOT_ANSWERED_CELL]  # an answer cell run as given (exercise 3 of lesson 11 fills a dict in the open)
            shell._showtraceback(etype, value, lines)
            return lines
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


NOT_ANSWERED_CELL = ("not answered yet: this cell still holds the exercise's placeholder (`# YOUR CODE HERE` and "
                     "`raise NotImplementedError()`); write your answer in their place and run the cell again")


def _raised_by_placeholder(frames, cell: tuple[str, int]) -> bool:
    """True when the cell that ran raised at its own top level, on the line of the student notebook's placeholder."""
    raiser = frames[-1][0].f_code
    text = "".join(linecache.getlines(cell[0]))
    return raiser.co_filename == cell[0] and raiser.co_name == "<module>" and placeholder_line(text) == cell[1]


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
    print(f"this lesson's files (agents, worlds) go into {name}/, beside this notebook")


watch_visible_checks()  # in a lesson kernel, from the first import on
