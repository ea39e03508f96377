"""Grade a Gradescope submission: ``python -m crashlab.grading.gradescope --submission DIR --results FILE
--solutions DIR`` (the bundle's ``run_autograder`` calls it; see :mod:`crashlab.release.bundle`).

Gradescope gives one folder per submission -- an upload or a whole GitHub repository -- and wants one
``results.json``. Each lesson the bundle grades (its ``grading.json``) is looked for in the submission by
its file name, anywhere in the folder, and graded by :func:`crashlab.grading.grade.grade_notebook`, with its
isolation, one notebook after the other. Every exercise of every lesson is a test with its points, so the
total is the same for every student: a lesson not submitted, or a file that is not a notebook, scores 0
on each of its exercises with the reason, and the file is always written.
"""

from __future__ import annotations

if __name__ == "__main__":  # the grader's own process: nothing here checks "iri" strings (crashlab.plumbing.startup)
    from crashlab.plumbing.startup import skip_unused_slow_imports

    skip_unused_slow_imports()

import argparse
import json
import sys
import time
from pathlib import Path

from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.grading.classroom import exercises
from crashlab.grading.grade import grade_notebook
from crashlab.grading.report import GradingError
from crashlab.grading.submissions import lesson_master, masters_by_lesson, notebooks_in
from crashlab.plumbing.outputs import RESULTS, write_output

MANIFEST = "grading.json"


def graded_lessons(solutions: Path) -> list[Path]:
    """The masters whose notebooks this bundle grades (the bundle may carry others that they build on)."""
    manifest = solutions.parent / MANIFEST
    names = json.loads(manifest.read_text())["notebooks"] if manifest.is_file() else None
    return [m for m in sorted(solutions.glob("*.ipynb")) if names is None or m.name in names]


def find_submitted(submission: Path, master: Path, masters: list[Path], lessons: dict[str, Path]) -> list[Path]:
    """Every notebook in the submission for ``master``'s lesson (by name, by the lesson id inside, or by a
    renamed copy such as ``01_naive_event_log (1).ipynb``): the master's exact name first, then shallowest.
    Links are listed too, to be refused with their reason when graded."""
    found = [p for p in notebooks_in(submission) if lesson_master(p, submission, masters, lessons) == master]
    return sorted(found, key=lambda p: (p.name != master.name, len(p.relative_to(submission).parts), str(p)))


def zero_tests(master: Path, why: str) -> list[dict]:
    return [{"name": f"{master.stem} {name}", "score": 0.0, "max_score": float(points), "visibility": "visible",
             "output": why} for name, points in exercises(master)]


def grade_submission(submission: Path, solutions: Path, deadline: float = 900.0) -> dict:
    """Gradescope's results object for one submission folder."""
    started = time.time()
    tests, output = [], []
    masters = sorted(solutions.glob("*.ipynb"))
    lessons = masters_by_lesson(masters)
    for master in graded_lessons(solutions):
        found = find_submitted(submission, master, masters, lessons)
        if not found:
            tests += zero_tests(master, f"not submitted: no {master.name} in the submission")
            output.append(f"{master.name}: not submitted")
            continue
        if len(found) > 1:
            output.append(f"{master.name}: graded {found[0].relative_to(submission)}; "
                          f"{len(found) - 1} other file(s) for that lesson ignored")
        try:
            report = grade_notebook(found[0], solutions=solutions, deadline=deadline, within=submission)
        except GradingError as exc:
            tests += zero_tests(master, f"not graded: {exc}")
            output.append(f"{master.name}: not graded ({exc})")
            continue
        except Exception as exc:  # a fault of the grader's: the results file is still written, and says so
            why = f"the grader failed on this notebook ({type(exc).__name__}: {cut_at_word(str(exc), 300)}); tell your instructor"
            tests += zero_tests(master, why)
            output.append(f"{master.name}: {why}")
            continue
        tests += [{**test.as_dict(), "name": f"{master.stem} {test.name}"} for test in report.tests]
        output.append(f"{master.name}: {report.score:g}/{report.max_score:g} (graded in {report.seconds:.0f} s)"
                      + "".join(f"\n  - {note}" for note in report.notes))
        # For the instructor, in the autograder's log (its stdout, hidden from students): how the code ran.
        print(f"{master.name}: " + ("isolated (student code ran as a sandbox user)" if report.isolated else
                                    "NOT isolated: the autograder did not run as root, so student code ran as the "
                                    "grader and could read the masters"), flush=True)
    return {"score": round(sum(t["score"] for t in tests), 2), "execution_time": round(time.time() - started, 1),
            "output": "\n".join(output), "stdout_visibility": "hidden", "tests": tests}


def write_atomically(results: dict, target: Path) -> None:
    """The file Gradescope reads, in the folder it gives the autograder for it: whatever is there is replaced."""
    target.parent.mkdir(parents=True, exist_ok=True)
    write_output(target, json.dumps(results, indent=2) + "\n", RESULTS, force=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crashlab.grading.gradescope", description=__doc__.split("\n")[0])
    parser.add_argument("--submission", type=Path, default=Path("/autograder/submission"))
    parser.add_argument("--results", type=Path, default=Path("/autograder/results/results.json"))
    parser.add_argument("--solutions", type=Path, default=Path("/autograder/source/solutions"))
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds per notebook (default %(default)s)")
    args = parser.parse_args(argv)
    results = grade_submission(args.submission.resolve(), args.solutions.resolve(), args.deadline)
    write_atomically(results, args.results)
    print(results["output"])
    print(f"score {results['score']:g} / {sum(t['max_score'] for t in results['tests']):g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
