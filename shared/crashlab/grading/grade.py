"""Grade a submitted notebook.

1. Find its master in ``solutions/`` and restore every locked cell (test cells included) from it:
   an edited or deleted test cell comes back as the instructor wrote it, hidden checks included.
2. Run the notebook in a fresh kernel of its own, in a scratch directory, with a timeout per cell.
3. Score each test cell from its execution status and outputs (nbgrader's ``determine_grade``).
4. Run the crash matrix, in separate processes, on the agent files the notebook wrote, and score
   it from the world's ledgers -- never from values the student's code reports.
5. Print a table and write Gradescope-shaped JSON.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from crashlab.grading.build import SKIP_WHEN_GRADING_TAG as SKIP_TAG
from crashlab.needs import Needs
from crashlab.grading.notebooks import grade_id, is_answer_cell, is_locked, is_test_cell, lesson_of, nbgrader_meta, repo_root

QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR"]  # no start-up warnings on the grader's terminal
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class GradingError(RuntimeError):
    """The file cannot be graded (not a notebook, not a course notebook). The message says why."""


@dataclass
class TestResult:
    name: str
    score: float
    max_score: float
    output: str
    kind: str  # 'cell' or 'matrix'

    def as_dict(self) -> dict:
        return {"name": self.name, "score": self.score, "max_score": self.max_score,
                "visibility": "visible", "output": self.output}


@dataclass
class GradeReport:
    notebook: str
    lesson: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 2)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 2)

    def as_dict(self) -> dict:
        return {"score": self.score, "max_score": self.max_score, "output": "\n".join(self.notes),
                "execution_time": round(self.seconds, 1), "tests": [t.as_dict() for t in self.tests]}

    def table(self) -> str:
        rows = [(t.name, f"{t.score:g}", f"{t.max_score:g}", (t.output.splitlines() or ["passed"])[0][:100])
                for t in self.tests]
        header = ("exercise", "score", "max", "feedback")
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
        lines = [f"{header[0]:<{widths[0]}}  {header[1]:>{widths[1]}}  {header[2]:>{widths[2]}}  {header[3]}"]
        lines.append("-" * (sum(widths) + 4 + 2 + 40))
        for name, score, max_score, feedback in rows:
            lines.append(f"{name:<{widths[0]}}  {score:>{widths[1]}}  {max_score:>{widths[2]}}  {feedback}")
        lines.append(f"{'total':<{widths[0]}}  {self.score:>{widths[1]}g}  {self.max_score:>{widths[2]}g}")
        return "\n".join(lines)

    def __str__(self) -> str:
        text = f"{self.notebook} (lesson {self.lesson})\n{self.table()}"
        failed = [t for t in self.tests if t.score < t.max_score]
        for test in failed:
            text += f"\n\n[{test.name}] {test.score:g}/{test.max_score:g}\n{test.output}"
        if self.notes:
            text += "\n\nnotes:\n" + "\n".join(f"- {n}" for n in self.notes)
        return text


# --- 1. find the master and restore its locked cells --------------------------------------------------------
def read_submission(path: Path) -> nbformat.NotebookNode:
    if not path.is_file():
        raise GradingError(f"{path}: no such file")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for a non-notebook
        raise GradingError(f"{path} is not a Jupyter notebook ({type(exc).__name__}: {str(exc)[:120]})") from None
    return nb


def find_master(submission: nbformat.NotebookNode, path: Path, solutions: Path) -> Path:
    lesson = lesson_of(submission)
    candidates = sorted(solutions.glob("*.ipynb"))
    for master in candidates:
        if master.name == path.name:
            return master
    for master in candidates:
        if lesson and lesson_of(nbformat.read(master, as_version=4)) == lesson:
            return master
    raise GradingError(f"{path} is not a course notebook: no master in {solutions} has its name or lesson id "
                       f"(masters: {', '.join(m.name for m in candidates) or 'none'})")


def restore_locked_cells(submission, master) -> tuple[nbformat.NotebookNode, list[str]]:
    """The submission with every locked cell taken from the master (edited or deleted ones included),
    answer cells kept as the student wrote them, and any nbgrader marks the student added removed."""
    notes = []
    master_cells = {grade_id(c): c for c in master.cells if grade_id(c)}
    nb = copy.deepcopy(submission)
    nb.metadata["crashlab"] = copy.deepcopy(master.metadata.get("crashlab", {}))
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
                if cell.source not in (source_cell.source, _as_given_to_students(source_cell)):
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




def skip_demo_cells(nb) -> int:
    """Blank the ungraded cells tagged ``skip-when-grading`` (long demonstrations, such as a whole crash
    matrix of the lesson's naive agent): grading runs the matrix itself, out of the kernel. A master
    may only tag cells that no test cell depends on."""
    skipped = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and SKIP_TAG in cell.metadata.get("tags", []) and not is_test_cell(cell):
            cell.source = "# skipped while grading: a demonstration, not an exercise"
            skipped += 1
    return skipped


def _fresh_copy(master_cell):
    """A master cell to put into the graded notebook: the instructor's source, no stale outputs."""
    cell = copy.deepcopy(master_cell)
    if cell.cell_type == "code":
        cell.outputs = []
    return cell


def _as_given_to_students(master_cell) -> str:
    """The source of a master cell as the student notebook shows it (hidden checks removed)."""
    from nbgrader.preprocessors import ClearHiddenTests

    cell, _ = ClearHiddenTests().preprocess_cell(copy.deepcopy(master_cell), {}, 0)
    return cell.source


# --- 2. run it in its own kernel -----------------------------------------------------------------------------
def execute(nb, workdir: Path, cell_timeout: int) -> tuple[dict[int, str], list[str]]:
    """Run every cell; return each code cell's execution status and notes about the run."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    statuses: dict[int, str] = {}

    def record(cell, cell_index, execute_reply):
        statuses[cell_index] = (execute_reply or {}).get("content", {}).get("status", "error")

    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHLAB_") or k == "CRASHLAB_ROOT"}
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, resources={"metadata": {"path": str(workdir)}},
                            on_cell_executed=record, extra_arguments=QUIET_KERNEL)
    notes = []
    old_env = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        client.execute(cwd=str(workdir))
    except DeadKernelError:
        notes.append("the kernel died while running the notebook; cells after that point were not run")
    except Exception as exc:  # a kernel that fails to start, a timeout we could not interrupt
        notes.append(f"the notebook did not run to the end ({type(exc).__name__}: {str(exc)[:200]})")
    finally:
        os.environ.clear()
        os.environ.update(old_env)
    return statuses, notes


def score_test_cell(cell, status: str | None) -> TestResult:
    from nbgrader.utils import determine_grade

    meta = nbgrader_meta(cell)
    max_score = float(meta["points"])
    name = meta["grade_id"]
    if status is None:
        return TestResult(name, 0.0, max_score, "this check did not run (an earlier cell stopped the notebook)", "cell")
    errors = [o for o in cell.outputs if o.output_type == "error"]
    stderr = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")
    if errors:
        error = errors[0]
        return TestResult(name, 0.0, max_score, _error_feedback(error), "cell")
    if status != "ok":
        return TestResult(name, 0.0, max_score, "the check did not complete successfully", "cell")
    score, _ = determine_grade(cell)
    if stderr and score == 0:
        return TestResult(name, 0.0, max_score, "the check wrote to stderr:\n" + ANSI.sub("", stderr)[-800:], "cell")
    score = max_score if score is None else float(score)
    return TestResult(name, score, max_score, "passed" if score == max_score else f"partial credit {score:g}", "cell")


def _error_feedback(error) -> str:
    frames = [ANSI.sub("", line) for line in error.get("traceback", [])]
    tail = "\n".join(frames)[-1200:]
    return f"{error.get('ename')}: {error.get('evalue')}\n{tail}".strip()


# --- 3. the crash matrix, in separate processes ----------------------------------------------------------------
def score_matrix_check(check: dict, workdir: Path, needs=None) -> TestResult:
    """Score one crash-matrix check on an agent file in ``workdir`` (``needs``: a shared
    :class:`crashlab.needs.Needs`, so servers such as Temporal start once per grading run)."""
    from crashlab.harness import crash_test
    from crashlab.needs import Needs

    if needs is None:
        with Needs(workdir / ".crashlab" / "servers") as own:
            return score_matrix_check(check, workdir, own)

    name, max_score = check["name"], float(check["points"])
    agent = workdir / check["agent"]
    if not agent.is_file():
        return TestResult(name, 0.0, max_score, f"the notebook did not write {check['agent']}, so there is no agent "
                                                f"to crash-test", "matrix")
    matrix = crash_test(agent, check.get("crash_points", "all"), expect=check.get("expect", "durable"),
                        jobs=int(check.get("jobs", 2)), progress=False, timeout=float(check.get("timeout", 60)),
                        workdir=workdir / ".crashlab" / "grading", resumers=int(check.get("resumers", 1)),
                        double=[tuple(pair) for pair in check.get("double", [])] or None,
                        faults=[tuple(f) for f in check.get("faults", [])] or None,
                        launcher=check.get("launcher", "warm"), preload=tuple(check.get("preload", ())),
                        extra_env=needs.env_for(check))
    ok_rows = sum(row.ok for row in matrix.rows)
    score = round(max_score * ok_rows / len(matrix.rows), 2)
    output = (f"{ok_rows}/{len(matrix.rows)} crash points clean (expected: {matrix.as_dict()['expectation']})")
    problems = matrix.problems()
    if problems:
        output += "\n" + "\n".join(f"- {p}" for p in problems[:12])
        if len(problems) > 12:
            output += f"\n- ... and {len(problems) - 12} more"
    return TestResult(name, score, max_score, output, "matrix")


# --- the whole thing --------------------------------------------------------------------------------------------
def grade_notebook(path: str | os.PathLike, *, json_out: str | os.PathLike | None = None,
                   solutions: Path | None = None, cell_timeout: int = 300, keep: bool = False) -> GradeReport:
    started = time.time()
    path = Path(path).resolve()
    solutions = solutions or repo_root() / "solutions"
    submission = read_submission(path)
    master_path = find_master(submission, path, solutions)
    master = nbformat.read(master_path, as_version=4)
    nb, notes = restore_locked_cells(submission, master)
    skip_demo_cells(nb)
    report = GradeReport(path.name, lesson_of(master) or "?", notes=notes)
    workdir = Path(tempfile.mkdtemp(prefix="crashlab-grade-"))
    try:
        statuses, run_notes = execute(nb, workdir, cell_timeout)
        report.notes += run_notes
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and is_test_cell(cell):
                report.tests.append(score_test_cell(cell, statuses.get(index)))
        with Needs(workdir / ".crashlab" / "servers") as needs:
            for check in master.metadata.get("crashlab", {}).get("matrix_checks", []):
                report.tests.append(score_matrix_check(check, workdir, needs))
        if not report.tests:
            raise GradingError(f"{master_path.name} has no graded cells")
    finally:
        if keep:
            report.notes.append(f"scratch directory kept at {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report.seconds = time.time() - started
    if json_out:
        Path(json_out).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return report


__all__ = ["grade_notebook", "GradingError", "GradeReport", "restore_locked_cells", "is_answer_cell"]
