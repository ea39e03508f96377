"""Grade a class: ``crashlab grade-batch SUBMISSIONS_DIR --jobs N --csv gradebook.csv --results-dir DIR``.

SUBMISSIONS_DIR holds one folder per student, each with any subset of the lessons' notebooks (found by
name anywhere in the folder, or by the lesson id in their metadata). Each notebook is graded by
:func:`crashlab.grading.grade.grade_notebook` in a process of its own (``python -m crashlab.grading.batch``),
so submissions are isolated from one another as well as from the grader: its own sandbox user, scratch
folder and deadline, N at a time.

**Resumable.** Each result is written atomically to ``DIR/graded/STUDENT/NOTEBOOK.HASH.json``, keyed by the
student, the lesson's notebook and a hash of the submitted file's bytes, the moment its grading ends. A run
keeps every result whose key still matches, so a batch killed half way (Ctrl-C, SIGTERM, or SIGKILL: the
gradings die with it) loses only the gradings in flight, and run again grades just those; a changed notebook
has a new hash and is graded again. Identical files (an untouched notebook submitted by half the class) are
graded once and the result is copied under each student's key.

**Never a crash of the batch.** A file that is not a notebook, or not a course notebook, is a row with the
reason (that costs no grading). A lesson not submitted is blank in the gradebook. A grading that fails
(the grader's fault, not the file's) is reported and retried on the next run.

**The gradebook** (``--csv``) has one row per student: ``student``, then ``NOTEBOOK/EXERCISE`` for every
exercise of every lesson anyone submitted, in the masters' order, then ``total``, ``max`` and ``notes``. It
is rebuilt from the results at the end of every complete run, so a resumed batch writes the same file.
"""

from __future__ import annotations

if __name__ == "__main__":  # the grader's own process: nothing here checks "iri" strings (crashlab.plumbing.startup)
    from crashlab.plumbing.startup import skip_unused_slow_imports

    skip_unused_slow_imports()

import csv
import fcntl
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path


from crashlab.plumbing.progress import start_ticking
from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.grading.classroom import exercises
from crashlab.course.notebooks import repo_root
from crashlab.grading.submissions import lesson_master, masters_by_lesson, notebooks_in, read_own, unreadable
from crashlab.grading.report import GradingError
from crashlab.plumbing.outputs import GRADEBOOK, RESULTS, write_output
from crashlab.plumbing.process_tree import die_with_parent

GRADING_ERROR_EXIT = 2  # the worker's exit status when the file cannot be graded (its content's fault)


@dataclass
class Submission:
    """One lesson's notebook of one student."""

    student: str
    master: Path
    path: Path
    sha: str
    result: dict | None = None  # the grader's results, or {"error": why} when the file cannot be graded
    failed: str = ""            # the grading failed (not the file's fault): retried next run
    folder: Path | None = None  # the student's folder, which the notebook must lie in

    @property
    def key(self) -> str:
        return f"{self.master.stem}.{self.sha[:16]}.json"


@dataclass
class Batch:
    students: dict[str, list[Submission]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    graded: int = 0     # gradings run by this invocation
    reused: int = 0     # results kept from an earlier run, or copied from an identical file
    seconds: float = 0.0

    @property
    def submissions(self) -> list[Submission]:
        return [s for subs in self.students.values() for s in subs]

    @property
    def failed(self) -> list[Submission]:
        return [s for s in self.submissions if s.failed]


# --- finding the submissions ---------------------------------------------------------------------------------
def discover(submissions: Path, solutions: Path) -> Batch:
    """Each student's folder (a folder directly below ``submissions``; a link is not one), and in it the notebook
    for each lesson: found by lesson, not by exact name, and never through a link (a link is kept, to be
    refused with its reason; see :mod:`crashlab.grading.submissions`)."""
    masters = sorted(solutions.glob("*.ipynb"))
    lessons = masters_by_lesson(masters)
    batch = Batch()
    folders = sorted(p for p in submissions.iterdir()
                     if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))
    for folder in folders:
        student, notes, chosen = folder.name, [], {}
        files = notebooks_in(folder)
        for path in files:
            master = lesson_master(path, folder, masters, lessons)
            if master is None:
                notes.append(f"{path.relative_to(folder)} is not a course notebook: ignored")
            elif master in chosen:
                notes.append(f"{path.relative_to(folder)}: another {master.stem} notebook was graded instead")
            else:
                chosen[master] = path
        if not files:
            notes.append("no notebook in the folder")
        batch.students[student] = [Submission(student, master, path, _fingerprint(path, folder), folder=folder)
                                   for master, path in sorted(chosen.items())]
        batch.notes[student] = notes
    return batch


def _fingerprint(path: Path, folder: Path) -> str:
    """The sha256 of the student's own bytes (of a link's text, for a link: never of what it points at)."""
    try:
        data = read_own(path, folder)
    except GradingError:
        data = b"link:" + os.fsencode(os.readlink(path)) if path.is_symlink() else b"unreadable:" + os.fsencode(path)
    return hashlib.sha256(data).hexdigest()


# --- the results folder --------------------------------------------------------------------------------------
def write_json_atomically(data: dict, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    write_output(target, json.dumps(data, indent=1) + "\n", RESULTS, force=True, mode=0o600)  # the batch's own folder


def read_result(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and (isinstance(data.get("tests"), list) or "error" in data) else None


class Results:
    """``DIR/graded/STUDENT/KEY``: one file per result; and, by content hash, any result already made."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.by_sha: dict[str, dict] = {}
        for path in sorted((folder / "graded").glob("*/*.json")):
            result = read_result(path)
            if result is not None and result.get("sha256"):
                self.by_sha.setdefault(result["sha256"], result)

    def path(self, sub: Submission) -> Path:
        return self.folder / "graded" / sub.student / sub.key

    def kept(self, sub: Submission) -> dict | None:
        result = read_result(self.path(sub))
        return result if result is not None and result.get("sha256") == sub.sha else None

    def save(self, sub: Submission, result: dict) -> None:
        result = {**result, "student": sub.student, "notebook": sub.path.name, "sha256": sub.sha}
        write_json_atomically(result, self.path(sub))
        self.by_sha.setdefault(sub.sha, result)
        sub.result = result


# --- grading, N at a time --------------------------------------------------------------------------------------
class Runner:
    def __init__(self, results: Results, solutions: Path, deadline: float, cell_timeout: int, isolate: bool | None):
        self.results, self.solutions = results, solutions
        self.args = [str(deadline), str(cell_timeout), {None: "auto", True: "yes", False: "no"}[isolate]]
        self.work = results.folder / ".work"
        self.running: dict[int, subprocess.Popen] = {}
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def grade(self, sub: Submission) -> dict | str:
        """The grader's results for ``sub``'s file, {"error": why} if it cannot be graded, or a string saying
        why the grading itself failed."""
        self.work.mkdir(parents=True, exist_ok=True)
        out, log = self.work / f"{sub.sha[:16]}.json", self.work / f"{sub.sha[:16]}.log"
        out.unlink(missing_ok=True)
        with self.lock:
            if self.stopping.is_set():
                return "interrupted"
            with open(log, "wb") as err:
                process = subprocess.Popen([sys.executable, "-m", "crashlab.grading.batch", str(sub.path), str(out),
                                            str(self.solutions), *self.args, str(sub.folder or sub.path.parent)], stdin=subprocess.DEVNULL, stdout=err,
                                           stderr=subprocess.STDOUT, start_new_session=True,
                                           # SIGTERM when the batch's thread that started it dies (even by SIGKILL):
                                           # it stops as if interrupted, every process it started killed, nothing written
                                           preexec_fn=die_with_parent(signal.SIGTERM))
            self.running[process.pid] = process
        try:
            code = process.wait()
        finally:
            with self.lock:
                self.running.pop(process.pid, None)
        said = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        if code == GRADING_ERROR_EXIT:
            return {"error": (said or ["cannot be graded"])[-1].removeprefix("error: ")}
        result = read_result(out) if code == 0 else None
        if result is None:
            return "interrupted" if code in (130, -signal.SIGTERM) else \
                f"the grading failed (exit {code}: {cut_at_word((said or ['no output'])[-1], 200)}); run the batch again to retry"
        out.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
        return result

    def stop(self) -> None:
        """Interrupt every grading in flight: each stops as a Ctrl-C'd `crashlab grade` does, writing nothing."""
        with self.lock:
            self.stopping.set()
            running = list(self.running.values())
        for process in running:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in running:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def grade_batch(submissions: Path, results_dir: Path, *, jobs: int = 2, solutions: Path | None = None,
                deadline: float = 900.0, cell_timeout: int = 120, isolate: bool | None = None,
                progress: bool = True) -> Batch:
    """Grade every student's notebooks not graded yet; KeyboardInterrupt stops the gradings in flight (what was
    graded is kept) and is raised again."""
    from tqdm import tqdm

    started = time.time()
    solutions = (solutions or repo_root() / "solutions").resolve()
    submissions, results_dir = submissions.resolve(), results_dir.resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    lock = open(results_dir / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise GradingError(f"another grade-batch is using {results_dir}: wait for it, or give another "
                           "--results-dir") from None
    results = Results(results_dir)
    batch = discover(submissions, solutions)
    if not batch.submissions:  # a wrong folder, or an empty one: a gradebook of zeros would look like grades
        lock.close()
        raise GradingError(f"no course notebook in {submissions}: give a folder with one folder of notebooks per student")
    pending: dict[str, list[Submission]] = {}
    for sub in batch.submissions:
        kept = results.kept(sub) or results.by_sha.get(sub.sha)
        if kept is not None:
            if kept.get("student") != sub.student or not results.path(sub).is_file():
                results.save(sub, {k: v for k, v in kept.items() if k not in ("student", "notebook")})
            sub.result = results.kept(sub)
            batch.reused += 1
            continue
        finished = read_result(results_dir / ".work" / f"{sub.sha[:16]}.json")  # graded, then killed before kept
        why = unreadable(sub.path, submissions / sub.student)
        if finished is not None or why:
            results.save(sub, finished or {"error": why})
            batch.reused += finished is not None
        else:
            pending.setdefault(sub.sha, []).append(sub)
    runner = Runner(results, solutions, deadline, cell_timeout, isolate)
    bar = tqdm(total=len(batch.submissions), initial=len(batch.submissions) - sum(map(len, pending.values())),
               unit="notebook", desc="grading", disable=not progress, file=sys.stderr)
    pool = ThreadPoolExecutor(max_workers=jobs)
    stop_ticking = start_ticking(bar if progress else None)  # a grading takes a minute: the bar's clock runs on
    try:
        futures = {pool.submit(runner.grade, subs[0]): subs for subs in pending.values()}
        for future in as_completed(futures):
            subs = futures[future]
            try:
                outcome = future.result()
            except Exception as exc:  # the batch's own fault (a full disk, say): this notebook fails, not the batch
                outcome = f"the grading failed ({type(exc).__name__}: {exc}); run the batch again to retry"
            for sub in subs:
                if isinstance(outcome, dict):
                    results.save(sub, outcome)
                else:
                    sub.failed = outcome
            batch.graded += isinstance(outcome, dict)
            batch.reused += len(subs) - 1 if isinstance(outcome, dict) else 0
            bar.update(len(subs))
    except BaseException:
        runner.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        stop_ticking()
        bar.close()
        lock.close()
        batch.seconds = time.time() - started
    return batch


# --- the gradebook and the summary --------------------------------------------------------------------------------
def columns(batch: Batch) -> list[tuple[Path, str, float]]:
    """(master, exercise, points) of every lesson anyone submitted, in the masters' order."""
    masters = sorted({sub.master for sub in batch.submissions})
    return [(master, name, float(points)) for master in masters for name, points in exercises(master)]


def student_row(batch: Batch, student: str, cols) -> dict[str, str]:
    subs = {sub.master: sub for sub in batch.students[student]}
    row, total, notes = {"student": student}, 0.0, list(batch.notes[student])
    for master, name, _ in cols:
        sub, value = subs.get(master), ""
        if sub is not None and sub.result is not None:
            if "error" in sub.result:
                value = "0"
            else:
                score = next((t["score"] for t in sub.result["tests"] if t.get("name") == name), 0.0)
                total += score
                value = f"{score:g}"
        row[f"{master.stem}/{name}"] = value
    for sub in batch.students[student]:
        if sub.failed:
            notes.append(f"{sub.master.stem}: {sub.failed}")
        elif sub.result is not None and "error" in sub.result:
            notes.append(f"{sub.master.stem}: not graded: {sub.result['error']}")
    submitted = {sub.master for sub in batch.students[student]}
    notes += [f"{m.stem}: not submitted" for m in dict.fromkeys(c[0] for c in cols) if m not in submitted]
    row.update(total=f"{total:g}", max=f"{sum(c[2] for c in cols):g}", notes="; ".join(notes))
    return row


def gradebook_csv(batch: Batch) -> str:
    cols = columns(batch)
    header = ["student", *(f"{m.stem}/{name}" for m, name, _ in cols), "total", "max", "notes"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for student in sorted(batch.students):
        writer.writerow(student_row(batch, student, cols))
    return buffer.getvalue()


def write_gradebook(batch: Batch, target: Path, *, force: bool = False) -> None:
    """Atomically; a file that is not a gradebook (a submitted notebook, say) is refused unless ``force``."""
    write_output(target, gradebook_csv(batch), GRADEBOOK, force=force)


def summary(batch: Batch, width: int = 100) -> str:
    cols = columns(batch)
    rows = [student_row(batch, student, cols) for student in sorted(batch.students)]
    name_width = max([len("student"), *(len(r["student"]) for r in rows)])
    lines = [f"{'student':<{name_width}}  {'score':>7}  {'max':>5}  notes", "-" * width]
    for row in rows:
        notes = row["notes"] or "-"
        room = max(20, width - name_width - 18)
        lines.append(f"{row['student']:<{name_width}}  {row['total']:>7}  {row['max']:>5}  "
                     + (notes if len(notes) <= room else notes[:room - 3] + "..."))
    count = len(batch.submissions)
    rate = batch.graded / batch.seconds * 60 if batch.seconds and batch.graded else 0.0
    lines.append(f"{len(rows)} students, {count} notebooks: {batch.graded} graded now, {batch.reused} kept from an "
                 f"earlier run or an identical file, {len(batch.failed)} failed, in {batch.seconds:.0f} s"
                 + (f" ({rate:.1f} gradings per minute)" if rate else ""))
    return "\n".join(lines)


# --- the worker: one grading, in a process of its own -------------------------------------------------------------
def _worker(argv: list[str]) -> int:
    """``python -m crashlab.grading.batch NOTEBOOK OUT SOLUTIONS DEADLINE CELL_TIMEOUT ISOLATE FOLDER``."""
    from crashlab.grading.grade import grade_notebook

    notebook, out, solutions, deadline, cell_timeout, isolate, folder = argv

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    try:
        grade_notebook(notebook, json_out=out, solutions=Path(solutions), deadline=float(deadline),
                       cell_timeout=int(cell_timeout), isolate={"auto": None, "yes": True, "no": False}[isolate],
                       within=Path(folder))
    except GradingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return GRADING_ERROR_EXIT
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
