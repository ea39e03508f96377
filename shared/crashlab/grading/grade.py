"""Grade a submitted notebook. Untrusted code produces data; a trusted process judges it.

1. Find its master in ``solutions/`` and restore every locked cell from it (an edited or deleted
   given cell comes back as the instructor wrote it).
2. Run the notebook in a kernel of its own, in a scratch folder -- as an unprivileged sandbox user
   when grading as root (:mod:`crashlab.sandbox`) -- under one wall-clock deadline. This only
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
import json
import os
import re
import shutil
import signal
import subprocess
import sys
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
    isolated: bool = False
    run_id: str = ""

    @property
    def score(self) -> float:
        return round(sum(t.score for t in self.tests), 2)

    @property
    def max_score(self) -> float:
        return round(sum(t.max_score for t in self.tests), 2)

    def as_dict(self) -> dict:
        return {"score": self.score, "max_score": self.max_score, "output": "\n".join(self.notes),
                "execution_time": round(self.seconds, 1), "isolated": self.isolated, "run_id": self.run_id,
                "notebook": self.notebook, "lesson": self.lesson, "tests": [t.as_dict() for t in self.tests]}

    def table(self) -> str:
        rows = [(t.name, f"{t.score:g}", f"{t.max_score:g}", (t.output.splitlines() or ["passed"])[0])
                for t in self.tests]
        header = ("exercise", "score", "max", "feedback")
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
        lines = [f"{header[0]:<{widths[0]}}  {header[1]:>{widths[1]}}  {header[2]:>{widths[2]}}  {header[3]}"]
        lines.append("-" * (sum(widths) + 4 + 2 + 40))
        for name, score, max_score, feedback in rows:
            lines.append(f"{name:<{widths[0]}}  {score:>{widths[1]}}  {max_score:>{widths[2]}}  {feedback}")
        lines.append(f"{'total':<{widths[0]}}  {self.score:>{widths[1]}g}  {self.max_score:>{widths[2]}g}")
        lines.append(f"isolated: {'yes' if self.isolated else 'no (not graded as root: student code ran as you)'}")
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


# --- 2. run it, as the student, under the deadline ------------------------------------------------------------
GRADED_ELSEWHERE = "# graded by the grader, outside this kernel: this cell awards nothing here"
JUDGE_SETUP_TAG = "judge-setup"


class Deadline:
    """One wall-clock limit for the whole submission."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def passed(self) -> bool:
        return self.left() <= 0


class Isolation:
    """Where the submission's processes run, and how they all die: a sandbox user when root."""

    def __init__(self, workdir: Path, want: bool | None, hide: tuple[Path, ...]):
        from crashlab import sandbox as sandboxes

        self.workdir = workdir
        self.slot = None
        self.sandbox = None
        if want is None:
            want = sandboxes.can_isolate()
        if want:
            self.slot = sandboxes.SandboxSlot(workdir / "home", hide=tuple(hide))
            self.sandbox = self.slot.sandbox
        else:
            sandboxes.become_subreaper()
        (workdir / "home").mkdir(exist_ok=True)
        self.private = Path(tempfile.mkdtemp(prefix="crashlab-private-"))  # the worlds' ledgers: ours alone
        os.chmod(self.private, 0o700)
        if self.sandbox is not None:
            self.sandbox.own(workdir)
            probe = self.popen([sys.executable, "-c", "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if probe.wait(60) != 0:
                self.close()
                raise GradingError(f"the sandbox user cannot run {sys.executable} (is a folder above it private, such as "
                                   "/root? `make setup` as root makes it traversable) -- or grade with --no-isolate")

    def give_lesson_files(self, lessons: list[str], solutions: Path) -> None:
        """A lesson that runs earlier lessons' reference agents gets just those files, not the masters."""
        from crashlab.grading.notebooks import written_files

        target = self.workdir / "home" / "lesson-files"
        for master in sorted(solutions.glob("*.ipynb")):
            nb = nbformat.read(master, as_version=4)
            if lesson_of(nb) in lessons:
                (target / lesson_of(nb)).mkdir(parents=True, exist_ok=True)
                for name, source in written_files(nb).items():
                    (target / lesson_of(nb) / name).write_text(source)
        self.lesson_files = target
        if self.sandbox is not None:
            self.sandbox.own(self.workdir / "home")

    @property
    def isolated(self) -> bool:
        return self.sandbox is not None

    def env(self, trusted: bool = True) -> dict[str, str]:
        """The environment of a process of the grading run; only trusted ones learn the private folder."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("CRASHLAB_") or k in ("CRASHLAB_ROOT", "CRASHLAB_TEMPORAL_BIN")}
        env.update({"HOME": str(self.workdir / "home"), "JUPYTER_RUNTIME_DIR": str(self.workdir / "home" / "runtime"),
                    "MPLCONFIGDIR": str(self.workdir / "home" / "mpl"), "CRASHLAB_PRIVATE_DIR": str(self.private),
                    "PYTHONDONTWRITEBYTECODE": "1"})
        if getattr(self, "lesson_files", None):
            env["CRASHLAB_LESSON_FILES"] = str(self.lesson_files)
        if not trusted:
            env.pop("CRASHLAB_PRIVATE_DIR")
        if self.sandbox is not None:
            env = self.sandbox.env(env)
        return env

    def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        """Start untrusted code: as the sandbox user, in a session of its own, with the caps."""
        from crashlab import sandbox as sandboxes

        demote = self.sandbox.demote if self.sandbox is not None else sandboxes.apply_limits
        return subprocess.Popen(cmd, cwd=self.workdir, env=self.env(trusted=False), start_new_session=True,
                                preexec_fn=demote,
                                **kwargs)

    def kill_everything(self) -> None:
        """Every process the submission started, whatever its session or signal handlers."""
        from crashlab import sandbox as sandboxes

        if self.sandbox is not None:
            self.sandbox.kill_all()
        else:
            sandboxes.kill_descendants()

    def close(self) -> None:
        self.kill_everything()
        if self.slot is not None:
            self.slot.close()
        shutil.rmtree(self.private, ignore_errors=True)


def run_submission(nb, isolation: Isolation, deadline: Deadline, cell_timeout: int) -> list[str]:
    """Run the notebook as the student until it ends or the deadline passes; return notes."""
    source, target = isolation.workdir / "submission.ipynb", isolation.workdir / ".executed.ipynb"
    nbformat.write(nb, source)
    if isolation.sandbox is not None:
        isolation.sandbox.own(isolation.workdir)
    process = isolation.popen([sys.executable, "-m", "crashlab.grading.run_notebook", str(source), str(target),
                               str(cell_timeout), str(isolation.workdir)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    notes = []
    try:
        _, err = process.communicate(timeout=max(1.0, deadline.left()))
        notes += [line for line in err.decode(errors="replace").splitlines() if line.startswith("the ")][:3]
    except subprocess.TimeoutExpired:
        notes.append(f"the notebook was still running at the deadline ({deadline.seconds:.0f} s): it was stopped, "
                     "and every process it started was killed")
    isolation.kill_everything()
    process.wait()
    return notes


def checks_in_kernel(master) -> bool:
    """Lessons whose checks still run in the student's kernel (their answers are functions defined in
    cells, or need an engine's test harness in-process); the judge cannot call those across a process
    boundary yet. Their scores come from the executed notebook and are marked as such."""
    return bool(master.metadata.get("crashlab", {}).get("checks_in_kernel"))


def score_kernel_checks(workdir: Path) -> list[TestResult]:
    from nbgrader.utils import determine_grade

    executed = workdir / ".executed.ipynb"
    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:  # noqa: BLE001 -- missing or damaged: nothing ran
        return []
    results = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_test_cell(cell):
            continue
        meta = nbgrader_meta(cell)
        points, name = float(meta["points"]), meta["grade_id"]
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            results.append(TestResult(name, 0.0, points, f"{errors[0].get('ename')}: {errors[0].get('evalue')}"[:1500],
                                      "kernel"))
            continue
        if cell.get("execution_count") is None:
            results.append(TestResult(name, 0.0, points, "this check did not run", "kernel"))
            continue
        score, _ = determine_grade(cell)
        score = points if score is None else float(score)
        results.append(TestResult(name, score, points, "passed (checked in your kernel)" if score == points else
                                  "the check wrote to stderr", "kernel"))
    return results


def blank_test_cells(nb) -> None:
    """The kernel's copies of the checks give the learner feedback; while grading they award nothing,
    so they are not run there at all. The judge runs the master's own copies."""
    for cell in nb.cells:
        if cell.cell_type == "code" and is_test_cell(cell):
            cell.source = GRADED_ELSEWHERE
            cell.outputs = []


# --- 3. the judge: the master's checks, in a trusted process --------------------------------------------------
def judge_checks(master, isolation: Isolation, deadline: Deadline) -> list[TestResult]:
    tests = [c for c in master.cells if c.cell_type == "code" and is_test_cell(c)]
    if not tests:
        return []
    preamble = "\n".join(c.source for c in master.cells
                         if c.cell_type == "code" and JUDGE_SETUP_TAG in c.metadata.get("tags", []))
    job = {"workdir": str(isolation.workdir), "preamble": preamble,
           "timeout": float(master.metadata.get("crashlab", {}).get("check_timeout", 240)),
           "checks": [{"name": grade_id(c), "source": c.source} for c in tests]}
    env = isolation.env()
    process = subprocess.Popen([sys.executable, "-m", "crashlab.grading.judge"], cwd=isolation.workdir, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    results: dict[str, dict] = {}
    try:
        out, _ = process.communicate(json.dumps(job).encode(), timeout=max(1.0, deadline.left()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
    for line in out.decode(errors="replace").splitlines():
        try:
            result = json.loads(line)
            results[result["name"]] = result
        except (ValueError, KeyError, TypeError):
            continue
    graded = []
    for cell in tests:
        meta = nbgrader_meta(cell)
        points = float(meta["points"])
        result = results.get(meta["grade_id"])
        if result is None:
            why = ("timed out: the submission's deadline passed before this check ran" if deadline.passed
                   else "this check did not complete")
            graded.append(TestResult(meta["grade_id"], 0.0, points, why, "check"))
        else:
            passed = result.get("passed") is True
            graded.append(TestResult(meta["grade_id"], points if passed else 0.0, points,
                                     str(result.get("feedback", ""))[:3000], "check"))
    return graded



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
    # Safety is all or nothing: one duplicate effect, lost order or avoidable repeat zeroes the check.
    score = max_score if ok_rows == len(matrix.rows) else 0.0
    output = (f"{ok_rows}/{len(matrix.rows)} crash points clean (expected: {matrix.as_dict()['expectation']}); "
              + ("all clean" if score else "any failing crash point scores 0 for this check"))
    problems = matrix.problems()
    if problems:
        output += "\n" + "\n".join(f"- {p}" for p in problems)
    return TestResult(name, score, max_score, output, "matrix")


# --- the whole thing --------------------------------------------------------------------------------------------
DEFAULT_DEADLINE = 900.0  # seconds for one submission, everything included


def grade_notebook(path: str | os.PathLike, *, json_out: str | os.PathLike | None = None,
                   solutions: Path | None = None, cell_timeout: int = 120, deadline: float = DEFAULT_DEADLINE,
                   isolate: bool | None = None, keep: bool = False) -> GradeReport:
    """Grade one submission. ``isolate``: None means "when root"; True insists; False never isolates.

    An interrupted grading (Ctrl-C, SIGTERM raised as KeyboardInterrupt) writes no results and re-raises.
    """
    if deadline <= 0 or cell_timeout <= 0:
        raise GradingError("the deadline and the cell timeout must be positive numbers of seconds")
    started = time.time()
    path = Path(path).resolve()
    solutions = (solutions or repo_root() / "solutions").resolve()
    submission = read_submission(path)
    master_path = find_master(submission, path, solutions)
    master = nbformat.read(master_path, as_version=4)
    nb, notes = restore_locked_cells(submission, master)
    skip_demo_cells(nb)
    in_kernel = checks_in_kernel(master)
    if not in_kernel:
        blank_test_cells(nb)
    report = GradeReport(path.name, lesson_of(master) or "?", notes=notes,
                         run_id=os.environ.get("CRASHLAB_RUN_ID", ""))
    limit = Deadline(deadline)
    workdir = Path(tempfile.mkdtemp(prefix="crashlab-grade-"))
    os.chmod(workdir, 0o755)
    isolation = None
    saved_env = dict(os.environ)
    try:
        isolation = Isolation(workdir, isolate, hide=(solutions,))
        report.isolated = isolation.isolated
        uses = master.metadata.get("crashlab", {}).get("uses_lessons", [])
        if uses:
            isolation.give_lesson_files(uses, solutions)
        report.notes += run_submission(nb, isolation, limit, cell_timeout)
        if in_kernel:
            report.tests += score_kernel_checks(workdir)
            report.notes.append("this lesson's checks ran in the notebook's own kernel (as the sandbox user when "
                                "isolated), not in the judge: see the README's threat model")
        else:
            report.tests += judge_checks(master, isolation, limit)
        isolation.kill_everything()
        os.environ.clear()
        os.environ.update({**saved_env, **{k: v for k, v in isolation.env().items() if k.startswith("CRASHLAB_")}})
        with Needs(isolation.private / "servers") as needs:
            for check in master.metadata.get("crashlab", {}).get("matrix_checks", []):
                if limit.passed:
                    report.tests.append(TestResult(check["name"], 0.0, float(check["points"]),
                                                   "timed out: the submission's deadline passed first", "matrix"))
                    continue
                check = {**check, "timeout": min(float(check.get("timeout", 60)), max(5.0, limit.left()))}
                report.tests.append(score_matrix_check(check, workdir, needs))
        if not report.tests:
            raise GradingError(f"{master_path.name} has no graded cells")
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        if isolation is not None:
            isolation.close()  # every process the submission started is dead before anything is written
        if keep:
            report.notes.append(f"scratch directory kept at {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report.seconds = time.time() - started
    if json_out:
        write_results(report, Path(json_out))
    return report


def write_results(report: GradeReport, target: Path) -> None:
    """Atomically: a reader sees the old file or the whole new one, never a half-written one."""
    target = target.resolve()
    fd, tmp = tempfile.mkstemp(prefix=".results-", dir=target.parent)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(report.as_dict(), indent=2) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)


__all__ = ["grade_notebook", "GradingError", "GradeReport", "restore_locked_cells", "is_answer_cell", "write_results"]
