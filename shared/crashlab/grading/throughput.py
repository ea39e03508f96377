"""How fast a class is graded on this machine (``crashlab bench-grading``): submissions per minute.

It generates a batch of distinct submissions of one lesson -- the master (full marks), the student notebook
(the unanswered stub) and a wrong answer (the master with its first exercise left unanswered) in turn, each
made distinct so that nothing is reused -- and grades it twice with :func:`crashlab.grading.batch.grade_batch`
into fresh results folders: one by one (``jobs=1``, an instructor's loop of ``crashlab grade``), then
``jobs`` at a time. Each grading is a full isolated grading in a process of its own, so the figure is what
a class of that size costs. Expect less than ``jobs`` times faster: a grading already runs its crash matrix
two rows at a time, and its agents, worlds and kernel share the same cores.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from crashlab.grading.batch import grade_batch
from crashlab.grading.build import student_version
from crashlab.course.notebooks import grade_id, is_answer_cell, lesson_of, repo_root
from crashlab.plumbing.outputs import THROUGHPUT, write_output
from crashlab.plumbing.scratch import scratch_dir

KINDS = ("master", "stub", "wrong")


def generate(master_path: Path, count: int, into: Path) -> dict[str, str]:
    """``count`` submissions in ``into/student-NN/``, masters, stubs and wrong answers in turn; student -> kind."""
    master = nbformat.read(master_path, as_version=4)
    stub = student_version(master)
    first = next(grade_id(c) for c in master.cells if is_answer_cell(c))
    wrong = copy.deepcopy(master)
    wrong.cells = [copy.deepcopy(next(s for s in stub.cells if grade_id(s) == first)) if grade_id(c) == first else c
                   for c in wrong.cells]
    made = {}
    for k in range(count):
        kind = KINDS[k % len(KINDS)]
        nb = copy.deepcopy({"master": master, "stub": stub, "wrong": wrong}[kind])
        nb.metadata["submitted_by"] = f"student-{k:02d}"  # distinct files: no grading is reused
        student = f"student-{k:02d}"
        (into / student).mkdir(parents=True)
        nbformat.write(nb, into / student / master_path.name)
        made[student] = kind
    return made


@dataclass
class Throughput:
    lesson: str
    submissions: int
    jobs: int
    kinds: dict[str, int]
    runs: dict[str, dict] = field(default_factory=dict)  # "one by one" / "jobs N" -> seconds, per_minute, scores

    def __str__(self) -> str:
        kinds = ", ".join(f"{n} {kind}" for kind, n in self.kinds.items())
        lines = [f"lesson {self.lesson}: {self.submissions} submissions ({kinds}), graded in full and isolated",
                 f"{'run':<12}  {'seconds':>8}  {'per minute':>10}"]
        lines += [f"{name:<12}  {run['seconds']:>8.0f}  {run['per_minute']:>10.1f}" for name, run in self.runs.items()]
        lines += [f"failed: {failure}" for run in self.runs.values() for failure in run["failures"]]
        if len(self.runs) == 2:
            one, many = self.runs.values()
            lines.append(f"speed-up with --jobs {self.jobs}: {many['per_minute'] / one['per_minute']:.2f}x")
        return "\n".join(lines)

    def write_json(self, path: str | Path, *, force: bool = False) -> None:
        """Atomically; an existing file of another kind is refused (:mod:`crashlab.plumbing.outputs`) unless ``force``."""
        write_output(path, json.dumps(asdict(self), indent=1) + "\n", THROUGHPUT, force=force)


def run_throughput(lesson: str = "01", submissions: int = 6, jobs: int = 2, loop: bool = True,
                   solutions: Path | None = None, progress: bool = True) -> Throughput:
    solutions = solutions or repo_root() / "solutions"
    master = next((m for m in sorted(solutions.glob("*.ipynb")) if lesson_of(nbformat.read(m, as_version=4)) == lesson),
                  None)
    if master is None:
        raise ValueError(f"no master for lesson {lesson} in {solutions}")
    with scratch_dir("crashlab-bench-grading-") as folder:
        made = generate(master, submissions, folder / "submissions")
        result = Throughput(lesson, submissions, jobs, {kind: list(made.values()).count(kind) for kind in KINDS})
        for name, n in ([("one by one", 1)] if loop else []) + [(f"jobs {jobs}", jobs)]:
            batch = grade_batch(folder / "submissions", folder / f"results-{n}", jobs=n, solutions=solutions,
                                progress=progress)
            scores = {sub.student: sum(t["score"] for t in (sub.result or {}).get("tests", []))
                      for sub in batch.submissions}
            result.runs[name] = {"seconds": round(batch.seconds, 1), "per_minute": round(submissions / batch.seconds * 60, 2),
                                 "graded": batch.graded, "failed": len(batch.failed), "scores": scores,
                                 "failures": [f"{sub.student}: {sub.failed}" for sub in batch.failed]}
    return result
