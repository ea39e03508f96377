"""The learner's self-check (``make check NB=...`` in a student release): with no masters at hand.

A graded class gets a release without ``solutions/``, so the learner cannot run the grader. What the
learner's own notebook does carry is enough for honest feedback: its visible checks (the test cells,
``# Exercise N: visible checks``) and the specs of its crash matrices (``metadata.crashlab.matrix_checks``,
kept by the build). So the self-check

1. runs the notebook as Run All does, in a scratch folder, leaving out the long given demonstrations
   (as the grader does, they award nothing), with the grader's own runner, deadline and clean-up
   (:func:`crashlab.grading.isolation.run_submission`, not isolated: it is the learner's own code);
2. reports each visible check as passed or not, and when not, says what is missing: an answer file still
   holding the placeholder, or the check's own message;
3. runs each crash matrix on the learner's agents with the grader's scorer
   (:func:`crashlab.grading.checks.score_matrix_check`) -- unless an agent's own files still hold a
   placeholder, which fails at once with a line saying which.

Nothing here is a grade: the grader also runs hidden checks, and runs the matrices on the master's answers
to the exercises an agent builds on. Passing the self-check is necessary, not sufficient.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import nbformat

from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.grading.build import SKIP_WHEN_GRADING_TAG, USES_ANSWERS_TAG
from crashlab.grading.checks import score_matrix_check, unanswered
from crashlab.grading.grade import read_submission
from crashlab.grading.isolation import Deadline, Isolation, run_submission
from crashlab.course.notebooks import exercise_of, grade_id, is_answer_cell, is_test_cell, lesson_of, nbgrader_meta, repo_root
from crashlab.grading.report import GradeReport, GradingError, TestResult
from crashlab.engines.needs import Needs
from crashlab.course.placeholder import PLACEHOLDER, unwritten
from crashlab.plumbing.progress import Ticker
from crashlab.plumbing.scratch import make_scratch, remove_scratch
from crashlab.course.metadata import lesson_meta

ANSWERS_IMPORT = re.compile(r"crashlab\.answers\.lesson(\d\d)")
NOT_THE_GRADE = ("self-check: your visible checks and the crash matrices on your own agents. The grade also runs "
                 "hidden checks, so passing here is necessary, not sufficient.")


def unreleased_answers(nb) -> list[str]:
    """The earlier lessons whose answers this lesson builds on and this copy of the course does not have: a
    graded class's release leaves them out until the instructor releases them."""
    imported = set(ANSWERS_IMPORT.findall("\n".join(cell.source for cell in nb.cells)))
    missing = {n for n in imported if importlib.util.find_spec(f"crashlab.answers.lesson{n}") is None}
    runs = lesson_meta(nb).get("uses_lessons", [])
    if runs and not os.environ.get("CRASHLAB_LESSON_FILES") and not any((repo_root() / "solutions").glob("*.ipynb")):
        missing |= set(runs)
    return sorted(missing)


def own_lessons_not_ready(nb) -> list[str]:
    """In a class's release, the earlier lessons whose own files (the learner's) this lesson's agents run, and why
    they cannot run yet (:func:`not_ready` of the release's ``crashlab.answers.lessonNN``)."""
    import importlib

    notes = []
    for lesson in sorted(set(ANSWERS_IMPORT.findall("\n".join(cell.source for cell in nb.cells)))):
        if importlib.util.find_spec(f"crashlab.answers.lesson{lesson}") is None:
            continue
        not_ready = getattr(importlib.import_module(f"crashlab.answers.lesson{lesson}"), "not_ready", None)
        problem = not_ready() if callable(not_ready) else None
        if problem:
            notes.append(f"this lesson's agents run your own lesson {lesson} files, and {problem}: what runs them "
                         "cannot pass")
    return notes


def answer_problems(nb, exercise: int, workdir: Path) -> list[str]:
    """What is missing in the answers of ``exercise``: a written file or an answer cell still holding the
    placeholder the student notebook put there."""
    problems = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_answer_cell(cell) or exercise_of(grade_id(cell)) != exercise:
            continue
        first = cell.source.partition("\n")[0].split()
        if first[:1] == ["%%writefile"]:
            problem = unwritten(workdir / first[-1])
            if problem:
                problems.append(problem)
        elif PLACEHOLDER.search(cell.source):
            problems.append(f"the answer cell `{cell.source.strip().splitlines()[0][:60]}` still has the placeholder "
                            "`raise NotImplementedError()`")
    return problems


def visible_check_result(cell, nb, workdir: Path) -> TestResult:
    meta = nbgrader_meta(cell)
    name, points = meta["grade_id"], float(meta.get("points", 0))
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if cell.get("execution_count") is not None and not errors:
        return TestResult(name, points, points, "visible checks passed", "cell")
    exercise = exercise_of(name)
    missing = answer_problems(nb, exercise, workdir) if exercise is not None else []
    if missing:
        why = f"exercise {exercise} is not answered yet: " + "; ".join(missing)
    elif errors:
        error = errors[0]
        why = f"{error.get('ename', 'error')}: {cut_at_word(str(error.get('evalue', '')).strip(), 500)}".rstrip(": ")
    else:
        why = "this check did not run (the notebook stopped before it: see the notes)"
    return TestResult(name, 0.0, points, why, "cell")


def matrix_result(check: Mapping[str, Any], workdir: Path, needs: Needs, deadline: Deadline, progress: bool = False) -> TestResult:
    name, points = check["name"], float(check["points"])
    agent = workdir / check["agent"]
    missing = unanswered(agent)
    if not agent.is_file():
        return TestResult(name, 0.0, points, f"the notebook did not write {check['agent']}: no agent to crash-test",
                          "matrix")
    if missing:
        return TestResult(name, 0.0, points, f"not run: {check['agent']} is not ready ({'; '.join(missing)})", "matrix")
    if deadline.passed:
        return TestResult(name, 0.0, points, "not run: the self-check's deadline passed first", "matrix")
    check = {**check, "timeout": min(float(check.get("timeout", 60)), max(5.0, deadline.left()))}
    return score_matrix_check(check, workdir, needs, progress=progress)


def self_check(path: str | Path, *, cell_timeout: int = 120, deadline: float = 900.0,
               progress: Callable[[str], None] | None = None) -> GradeReport:
    """Self-check a learner's notebook; raises GradingError for a file that is not a course notebook. ``progress``:
    told each stage as it starts, and that it is still going after a few silent seconds (the command line prints
    them); the crash matrices then show a progress bar."""
    started = time.time()

    def say(stage: str) -> None:
        if progress is not None:
            progress(f"[{time.time() - started:4.0f} s] {stage}")
            ticker.said()
    ticker = Ticker(say)
    path = Path(path).resolve()
    nb = read_submission(path)
    lesson = lesson_of(nb)
    if not lesson:
        raise GradingError(f"{path} is not a course notebook (no lesson in its metadata): check one of course/")
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        cell.outputs, cell.execution_count = [], None  # only this run's outputs count, not those saved in the file
        tags = cell.get("metadata", {}).get("tags", [])
        if SKIP_WHEN_GRADING_TAG in tags and USES_ANSWERS_TAG not in tags:
            cell.source = "pass  # a given demonstration: left out of the self-check"
    report = GradeReport(path.name, lesson, notes=[NOT_THE_GRADE], self_check=True)
    missing = unreleased_answers(nb)
    if missing:
        report.notes.append(f"this lesson builds on the answers of lesson {', '.join(missing)}, which your copy of the "
                            "course does not have yet (your instructor releases them): what runs them cannot pass")
    report.notes += own_lessons_not_ready(nb)
    limit = Deadline(deadline)
    workdir = make_scratch("crashlab-check-")
    isolation = None
    try:
        if progress is not None:
            ticker.start()
        isolation = Isolation(workdir, False, hide=(), lesson=lesson)
        executed = isolation.private / "executed.ipynb"
        ticker.stage(f"running {path.name} as Run All does (the long given demonstrations left out)")
        report.notes += run_submission(nb, isolation, limit, cell_timeout, executed=executed, on_cell=lambda i, n:
                                       ticker.stage(f"running {path.name}, cell {i} of {n}", quiet=True))
        ran = nbformat.read(executed, as_version=4) if executed.is_file() else nb
        report.tests += [visible_check_result(cell, ran, workdir) for cell in ran.cells
                         if cell.cell_type == "code" and is_test_cell(cell)]
        with Needs(isolation.private / "servers") as needs:
            for check in lesson_meta(nb).get("matrix_checks", []):
                ticker.stage(f"crash matrix {check['name']}: {check['agent']}, killed at each crash point and resumed")
                ticker.stage(None, quiet=True)  # its progress bar's clock runs on
                report.tests.append(matrix_result(check, workdir, needs, limit, progress=progress is not None))
    finally:
        ticker.stop()
        if isolation is not None:
            isolation.close()
        remove_scratch(workdir)
    report.seconds = time.time() - started
    return report
