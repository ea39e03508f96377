"""Grade a submitted notebook. Untrusted code produces data; a trusted process judges it.

1. Find its master in ``solutions/`` and restore every locked cell from it (an edited or deleted
   given cell comes back as the instructor wrote it).
2. Run the notebook in a kernel of its own, in a scratch folder -- as an unprivileged sandbox user
   when grading as root (:mod:`crashlab.plumbing.sandbox`) -- under one wall-clock deadline. This only
   produces the student's files (agents, modules); the kernel's check cells award nothing.
3. The judge (:mod:`crashlab.grading.judge`), a fresh trusted process, runs each master check and
   calls the student's functions across a process boundary, getting plain data back.
4. The crash matrices run the student's agents in separate processes and are scored from the world's
   ledgers, all or nothing: one duplicate, lost order or avoidable repeat zeroes the check.
5. Every process the submission started is killed; then, and only then, the results are written,
   atomically. An interrupted grading writes nothing.
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

import nbformat

from crashlab.answers import answer_files
from crashlab.grading.checks import judge_checks, name_unanswered, score_matrix_check
from crashlab.grading.references import lesson_references
from crashlab.grading.syntax import answer_file_syntax_errors, name_syntax_errors
from crashlab.grading.isolation import Deadline, Isolation, keep_only_what_the_submission_writes, run_submission
from crashlab.course.notebooks import grade_id, is_answer_cell, is_locked, is_test_cell, lesson_of, nbgrader_meta, repo_root
from crashlab.grading.build import as_given_to_students
from crashlab.grading.report import GradeReport, GradingError, TestResult, without_grader_paths, write_results
from crashlab.grading.submissions import read_notebook
from crashlab.engines.needs import Needs
from crashlab.plumbing.progress import Ticker
from crashlab.course.metadata import lesson_meta

# --- 1. find the master and restore its locked cells --------------------------------------------------------
def read_submission(path: Path, folder: Path | None = None) -> nbformat.NotebookNode:
    """The student's own notebook: a regular file inside ``folder`` (its own by default), never through a link
    (see :mod:`crashlab.grading.submissions`)."""
    return read_notebook(path, folder)


def find_master(submission: nbformat.NotebookNode, path: Path, solutions: Path) -> Path:
    lesson = lesson_of(submission)
    candidates = sorted(solutions.glob("*.ipynb"))
    for master in candidates:
        if master.name == path.name:
            return master
    for master in candidates:
        if lesson and lesson_of(nbformat.read(master, as_version=4)) == lesson:
            return master
    for master in candidates:  # a browser's or Jupyter's rename of a notebook that lost its metadata
        if path.stem.startswith(master.stem):
            return master
    raise GradingError(f"{path} is not a course notebook: no master in {solutions} has its name or lesson id "
                       f"(masters: {', '.join(m.name for m in candidates) or 'none'})")


def restore_locked_cells(submission, master) -> tuple[nbformat.NotebookNode, list[str]]:
    """The submission with every locked cell taken from the master (edited or deleted ones included),
    answer cells kept as the student wrote them, and any nbgrader marks the student added removed."""
    notes = []
    master_cells = {grade_id(c): c for c in master.cells if grade_id(c)}
    nb = copy.deepcopy(submission)
    nb.metadata["crashlab"] = copy.deepcopy(lesson_meta(master))
    cells, seen = [], set()
    for cell in nb.cells:
        gid = grade_id(cell)
        source_cell = master_cells.get(gid) if gid else None
        if gid and source_cell is None:
            cell.metadata.pop("nbgrader", None)  # not the instructor's: no points for it
            notes.append(f"cell {gid!r} is not in the master: its grading marks were ignored")
        elif source_cell is not None and gid not in seen:
            seen.add(gid)
            if is_locked(source_cell) or is_test_cell(source_cell):
                if cell.source not in (source_cell.source, as_given_to_students(source_cell)):
                    notes.append(f"restored edited cell {gid!r} from the master")
                cell = _fresh_copy(source_cell)
            else:
                cell.metadata["nbgrader"] = copy.deepcopy(nbgrader_meta(source_cell))
        elif gid in seen:
            cell.metadata.pop("nbgrader", None)
            notes.append(f"duplicate cell {gid!r} ignored for grading")
        cells.append(cell)
    # Put back locked cells the student deleted, right after the master cell that precedes them.
    order = [grade_id(c) for c in master.cells]
    for i, master_cell in enumerate(master.cells):
        gid = grade_id(master_cell)
        if not gid or gid in seen or not (is_locked(master_cell) or is_test_cell(master_cell)):
            continue
        restored = _fresh_copy(master_cell)
        at = len(cells)
        for previous in reversed(order[:i]):
            positions = [k for k, c in enumerate(cells) if previous and grade_id(c) == previous]
            if positions:
                at = positions[0] + 1
                break
        cells.insert(at, restored)
        seen.add(gid)
        notes.append(f"restored deleted cell {gid!r} from the master")
    nb.cells = cells
    return nb, notes


def _fresh_copy(master_cell):
    """A master cell to put into the graded notebook: the instructor's source, no stale outputs."""
    cell = copy.deepcopy(master_cell)
    if cell.cell_type == "code":
        cell.outputs = []
    return cell


# --- the whole thing --------------------------------------------------------------------------------------------
DEFAULT_DEADLINE = 900.0  # seconds for one submission, everything included


def grade_notebook(path: str | os.PathLike, *, json_out: str | os.PathLike | None = None,
                   solutions: Path | None = None, cell_timeout: int = 120, deadline: float = DEFAULT_DEADLINE,
                   isolate: bool | None = None, keep: bool = False, within: Path | None = None,
                   force_json: bool = False, progress: Callable[[str], None] | None = None) -> GradeReport:
    """Grade one submission. ``isolate``: None means "when root"; True insists; False never isolates.
    ``within``: the student's folder, which the notebook must lie in (by default its own folder); it is read
    once, never through a symbolic link, and only that copy is graded. ``json_out`` replaces only a results
    file (:class:`crashlab.plumbing.outputs.OutputError` otherwise), or anything with ``force_json``. ``progress``: told
    each stage as it starts (a grading takes minutes on a loaded machine; the CLI prints them), and the crash
    matrices then show a progress bar.

    An interrupted grading (Ctrl-C, SIGTERM raised as KeyboardInterrupt) writes no results and re-raises.
    """
    if deadline <= 0 or cell_timeout <= 0:
        raise GradingError("the deadline and the cell timeout must be positive numbers of seconds")
    started = time.time()
    path = Path(os.path.abspath(path))  # not resolved: a link must be seen as one, and refused
    solutions = (solutions or repo_root() / "solutions").resolve()
    submission = read_submission(path, within)
    master_path = find_master(submission, path, solutions)
    master = nbformat.read(master_path, as_version=4)
    nb, notes = restore_locked_cells(submission, master)
    keep_only_what_the_submission_writes(nb, master)
    report = GradeReport(path.name, lesson_of(master) or "?", notes=notes,
                         run_id=os.environ.get("CRASHLAB_RUN_ID", ""))
    limit = Deadline(deadline)
    started_at = time.monotonic()

    def say(stage: str) -> None:
        if progress is not None:
            progress(f"[{time.monotonic() - started_at:4.0f} s] {stage}")
            ticker.said()
    # A stage silent for a few seconds says it is still going (a lesson's checks take minutes on a loaded machine).
    ticker = Ticker(say)
    isolation = None
    saved_env, saved_tempdir, system_tmp = dict(os.environ), tempfile.tempdir, tempfile.gettempdir()
    try:
        if progress is not None:
            ticker.start()
        lesson = report.lesson
        # Hidden from the student's processes: the masters, the git history that holds them too, and the
        # library's answers to this lesson.
        secret = (solutions, solutions.parent / ".git", *map(Path, answer_files(lesson)))
        say(f"grading {path.name} against {master_path.name} (lesson {lesson}), deadline {deadline:.0f} s")
        isolation = Isolation(None, isolate, hide=secret, lesson=lesson)
        workdir = isolation.workdir
        report.isolated = isolation.isolated
        report.sealed = dict(isolation.sealed)
        report.notes += isolation.notes
        ticker.stage("running the notebook as the student" + (" (a sandbox user)" if isolation.isolated else "")
                     + ": the cells that write your files and your answer cells")
        report.notes += run_submission(nb, isolation, limit, cell_timeout, on_cell=lambda i, n: ticker.stage(
            f"running the notebook as the student, cell {i} of {n}", quiet=True))
        # The earlier lessons' files that the checks run: handed over once the student's kernel is dead, seen by
        # the checks' agents and not by the student's code (see crashlab.grading.judge), and gone before the
        # matrices run the student's agents.
        uses = lesson_meta(master).get("uses_lessons", [])
        if uses:
            isolation.give_lesson_files(uses, solutions)
        points = {grade_id(c): float(nbgrader_meta(c)["points"]) for c in master.cells
                  if c.cell_type == "code" and is_test_cell(c)}
        ticker.stage(f"judging your answers: {len(points)} check(s), each said as it ends")
        report.tests += judge_checks(master, nb, isolation, limit, on_result=lambda name, passed: say(
            f"  {name}: {points.get(name, 0) if passed else 0:g}/{points.get(name, 0):g}"),
            on_start=lambda name: ticker.stage(f"judging {name}", quiet=True))
        isolation.kill_everything()
        isolation.take_lesson_files_back()
        os.environ.clear()
        os.environ.update({**saved_env, **{k: v for k, v in isolation.env().items() if k.startswith("CRASHLAB_")},
                           "TMPDIR": str(isolation.scratch)})
        tempfile.tempdir = str(isolation.scratch)  # the rows' folders, inside what the sandbox's view shows
        references = lesson_references(master)
        with Needs(isolation.private / "servers") as needs:
            for check in lesson_meta(master).get("matrix_checks", []):
                if limit.passed:
                    report.tests.append(TestResult(check["name"], 0.0, float(check["points"]),
                                                   "timed out: the submission's deadline passed first", "matrix"))
                    continue
                check = {**check, "timeout": min(float(check.get("timeout", 60)), max(5.0, limit.left()))}
                ticker.stage(f"crash matrix {check['name']}: {check['agent']}, killed at each crash point and resumed")
                ticker.stage(None, quiet=True)  # its progress bar's clock runs on
                report.tests.append(score_matrix_check(check, workdir, needs, references, deadline=limit.at,
                                                       progress=progress is not None))
                say(f"  {check['name']}: {report.tests[-1].score:g}/{report.tests[-1].max_score:g}")
        if not report.tests:
            raise GradingError(f"{master_path.name} has no graded cells")
        name_unanswered(report.tests, master, workdir)
        name_syntax_errors(report.tests, answer_file_syntax_errors(nb))
        folders = {str(workdir): "", str(isolation.scratch): "(the grader's scratch folder)/",
                   str(isolation.private): "(the grader's folder)/", str(isolation.refs): "(the grader's folder)/",
                   str(isolation.box): "(the grader's folder)/", system_tmp: "(a temporary folder)/",
                   str(repo_root()): "(the course)/"}
        for test in report.tests:
            test.output = without_grader_paths(test.output, folders)
    finally:
        ticker.stop()
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
        if isolation is not None:
            isolation.kill_everything()  # every process the submission started is dead before anything is written
            report.notes += [said for said in isolation.limits_met() if said not in report.notes]
            report.peak = isolation.peak()
            if keep:
                report.notes.append(f"scratch directory kept at {isolation.keep()}")
            isolation.close()
    report.seconds = time.time() - started
    if json_out:
        write_results(report, Path(json_out), force=force_json)
    return report


__all__ = ["grade_notebook", "GradingError", "GradeReport", "TestResult", "restore_locked_cells", "is_answer_cell",
           "write_results", "score_matrix_check"]
