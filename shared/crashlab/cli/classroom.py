"""The ``crashlab`` commands for authoring the course and running a graded class, kept apart from
:mod:`crashlab.cli` so that file stays about the world and the harness: ``build``, ``execute``, ``result``,
``classroom``, ``release``, ``autograder``, ``self-check``, ``grade-batch`` and ``bench-grading``. Each checks its arguments before it starts anything (one ``error:`` line, exit 2)."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import sys
from pathlib import Path

from crashlab.cli import args as check
from crashlab.cli.args import UsageError


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _new_folder(text: str) -> str:
    check.output_folder(text)
    path = Path(text)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise argparse.ArgumentTypeError(f"{text} exists and is not an empty folder: give a new one")
    return text


def _folder(text: str) -> str:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"no such folder: {text!r}")
    return text


def _zip_file(text: str) -> str:
    check.output_file(text)
    if not text.endswith(".zip"):
        raise argparse.ArgumentTypeError(f"{text}: the autograder is a zip file; end the name with .zip")
    return text


def _notebook_names(text: str) -> list[str]:
    names = [name.strip().removesuffix(".ipynb") for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("--notebooks: give lesson numbers or notebook names, comma-separated (01,02)")
    return names


def _release(args) -> int:
    from crashlab.release.student import ReleaseError, build_release

    try:
        notes = build_release(Path(args.out), answers_through=args.answers_through, lessons=args.lessons)
    except ReleaseError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote the student release to {args.out} (a git repository: push it as the class's template)")
    for note in notes:
        print(f"note: {note}")
    return 0


def _autograder(args) -> int:
    from crashlab.plumbing.outputs import BUNDLE, ENCRYPTED_BUNDLE
    from crashlab.release.bundle import build_autograder, check_key_file, encrypt, encrypted_name

    if args.encrypt and shutil.which("openssl") is None:
        raise UsageError("--encrypt needs the openssl command, which is not installed")
    check.check_output(args.out, BUNDLE, args.force)
    if args.encrypt:
        check.check_output(str(encrypted_name(Path(args.out))), ENCRYPTED_BUNDLE, args.force)
        try:
            check_key_file(Path(args.encrypt))  # before the bundle is built: a minute lost otherwise
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        graded = build_autograder(Path(args.out), args.notebooks, force=args.force)
    except ValueError as exc:  # an unknown lesson, or (OutputError) an output that appeared meanwhile
        raise UsageError(str(exc)) from None
    print(f"wrote {args.out}: grades {', '.join(m.name for m in graded)}. It holds the masters: keep it private.")
    if args.encrypt:
        try:
            target = encrypt(Path(args.out), Path(args.encrypt), force=args.force)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        print(f"wrote {target}, encrypted with the key in {args.encrypt}: put it at a URL the classroom workflow "
              "can download (secret CRASHLAB_BUNDLE_URL) and the key in the secret CRASHLAB_BUNDLE_KEY")
    return 0


def _self_check(args) -> int:
    from crashlab.grading.report import GradingError
    from crashlab.grading.selfcheck import self_check

    try:
        report = self_check(args.notebook, cell_timeout=args.timeout, deadline=args.deadline,
                            progress=lambda stage: print(stage, file=sys.stderr, flush=True))
    except GradingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report)
    print(f"\nself-check {report.score:g} / {report.max_score:g}  ({report.seconds:.0f} s)")
    return 0 if report.score >= report.max_score else 1


def _grade_batch(args) -> int:
    from crashlab.grading.batch import grade_batch, summary, write_gradebook
    from crashlab.grading.feedback import FILE_NAME as FEEDBACK_FILE, write_feedback
    from crashlab.grading.report import GradingError
    from crashlab.plumbing.outputs import GRADEBOOK, OutputError

    check.check_results_dir(args.results_dir, args.submissions, args.csv)
    check.check_output(args.csv, GRADEBOOK, args.force)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        batch = grade_batch(Path(args.submissions), Path(args.results_dir), jobs=args.jobs,
                            solutions=Path(args.solutions) if args.solutions else None, deadline=args.deadline,
                            cell_timeout=args.timeout, isolate=False if args.no_isolate else None,
                            progress=not args.quiet)
    except GradingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: every result already graded is kept in {args.results_dir}; run the same command again "
              "to grade the rest", file=sys.stderr)
        return 130
    print(summary(batch))
    written = write_feedback(batch, Path(args.results_dir))
    if written:
        print(f"wrote {len(written)} students' feedback, one file each to hand back: "
              f"{Path(args.results_dir) / 'graded' / 'STUDENT' / FEEDBACK_FILE}")
    if args.csv:
        try:
            write_gradebook(batch, Path(args.csv), force=args.force)
        except OutputError as exc:
            print(f"error: {exc}; every result is kept in {args.results_dir}", file=sys.stderr)
            return 2
        print(f"wrote {args.csv}")
    return 1 if batch.failed else 0


def _bench_grading(args) -> int:
    from crashlab.grading.throughput import run_throughput
    from crashlab.plumbing.outputs import THROUGHPUT

    check.check_output(args.json, THROUGHPUT, args.force)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_throughput(args.lesson, submissions=args.submissions, jobs=args.jobs, loop=not args.no_loop,
                                progress=not args.quiet)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(result)
    if args.json:
        try:
            result.write_json(args.json, force=args.force)
        except ValueError as exc:  # OutputError: the file appeared meanwhile
            raise UsageError(str(exc)) from None
        print(f"wrote {args.json}")
    return 0


def _build(args) -> int:
    from crashlab.grading.build import build_course, out_of_date

    if args.check:
        stale = out_of_date()
        if stale:
            print("out of date (run `crashlab build`): " + ", ".join(str(p) for p in stale), file=sys.stderr)
            return 1
        print("course/ is up to date with solutions/")
        return 0
    done = build_course(force=args.force)
    for path in done.wrote:
        print(f"wrote {path}")
    for path, why in done.left_alone:
        print(f"left {path} alone: {why}")
    if not done.wrote and not done.left_alone:
        print("course/ was already up to date")
    return 0


def _execute(args) -> int:
    from crashlab.grading.execute import execute_in_place
    from crashlab.plumbing.outputs import OutputError

    for path in args.notebooks:
        try:
            seconds = execute_in_place(Path(path), timeout=args.timeout)
        except OutputError as exc:  # a full disk, say: the notebook is left as it was
            print(f"error: {exc}; {path} is unchanged", file=sys.stderr)
            return 1
        print(f"executed {path} in {seconds:.0f} s")
    return 0


def _result(args) -> int:
    """Exit 0 when test NAME has full marks in a results file, 1 when not, 2 when it is missing.

    With ``--run-id ID`` (the classroom workflow's command names its run; ``CRASHLAB_RUN_ID`` when it is not
    given), only a results file written by the grading run ID counts: a stale or committed file scores 0."""
    import os

    try:
        results = _read_results(Path(args.results))
        score, max_score, output = _test_result(results, args.test, args.results)
    except ValueError as exc:
        print(f"error: {exc}: 0 points", file=sys.stderr)
        return 2
    run_id = args.run_id if args.run_id is not None else os.environ.get("CRASHLAB_RUN_ID")
    if run_id is not None and not run_id.strip():
        print("error: --run-id is empty (the workflow's run id did not reach the command): 0 points", file=sys.stderr)
        return 2
    if run_id and results.get("run_id") != run_id:
        print(f"error: {args.results} was not written by this grading run ({run_id}): 0 points", file=sys.stderr)
        return 2
    print(f"{args.test}: {score:g}/{max_score:g}\n{output}")
    return 0 if score >= max_score else 1


def _read_results(path: Path) -> dict:
    """A results file's JSON object, or ValueError saying why there is none."""
    try:
        results = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no results file {path} (was the notebook graded?)") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path} ({exc.strerror})") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ValueError(f"{path} is not a results file (not JSON: {str(exc)[:80]})") from None
    if not isinstance(results, dict) or not isinstance(results.get("tests"), list):
        raise ValueError(f"{path} is not a results file (no list of tests)")
    return results


def _test_result(results: dict, name: str, path: str) -> tuple[float, float, str]:
    """(score, max_score, output) of test ``name``, or ValueError if it is missing or wrong-shaped."""
    test = next((t for t in results["tests"] if isinstance(t, dict) and t.get("name") == name), None)
    if test is None:
        raise ValueError(f"no result for {name!r} in {path}")
    numbers = [test.get("score"), test.get("max_score")]
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) for n in numbers):
        raise ValueError(f"{path}: the result for {name!r} has no numeric score and max_score")
    output = test.get("output", "")
    if not isinstance(output, str):
        raise ValueError(f"{path}: the result for {name!r} has an output that is not text")
    score, max_score = numbers
    return float(score), float(max_score), output  # type: ignore[arg-type]  # numbers, checked above


def _classroom(args) -> int:
    from crashlab.grading.classroom import workflow

    print(workflow(lessons=args.lessons), end="")
    return 0


def add_class_commands(sub) -> None:
    build = sub.add_parser("build", help="regenerate course/ from solutions/")
    build.add_argument("--check", action="store_true", help="only check that course/ is up to date")
    build.add_argument("--force", action="store_true",
                       help="also replace student notebooks changed since the build wrote them (a learner's work: "
                            "authors only)")
    build.set_defaults(func=_build)

    execute = sub.add_parser("execute", help="run master notebooks and save their outputs (authors)")
    execute.add_argument("notebooks", type=check.notebook_file, nargs="+")
    execute.add_argument("--timeout", type=check.positive_int, default=600, help="seconds per cell (default %(default)s)")
    execute.set_defaults(func=_execute)

    result = sub.add_parser("result", help="exit 0 if one test has full marks in a results file (for CI graders)")
    result.add_argument("results", help="a results file written by `crashlab grade --json` (missing or wrong: 0 points)")
    result.add_argument("--test", required=True)
    result.add_argument("--run-id", metavar="ID", help="count only a results file written by the grading run ID "
                                                       "(default: $CRASHLAB_RUN_ID, if set)")
    result.set_defaults(func=_result)

    classroom = sub.add_parser("classroom", help="print the GitHub Classroom workflow for the current masters")
    classroom.add_argument("--lessons", type=check.lesson_range, metavar="NN-MM",
                           help="grade only these lessons: 03, 01-03 or 01,04")
    classroom.set_defaults(func=_classroom)

    release = sub.add_parser("release", help="write the student repository for a graded class: no masters, no "
                                             "hidden checks, no lesson answers")
    release.add_argument("out", type=_new_folder, metavar="OUT_DIR", help="a new or empty folder")
    release.add_argument("--answers-through", type=check.lesson_number, metavar="NN",
                         help="also release the answers of lessons up to NN (later lessons build on them)")
    release.add_argument("--lessons", type=check.lesson_range, metavar="NN-MM",
                         help="release (and grade in the Classroom workflow) only these lessons: 03, 01-03 or 01,04")
    release.set_defaults(func=_release)

    autograder = sub.add_parser("autograder", help="write the private grading bundle: a Gradescope autograder, "
                                                   "also fetched by the release's classroom workflow")
    autograder.add_argument("out", type=_zip_file, metavar="OUT.zip")
    autograder.add_argument("--notebooks", type=_notebook_names, metavar="LIST",
                            help="the lessons it grades, comma-separated numbers or names (default: all)")
    autograder.add_argument("--encrypt", type=check.output_file, metavar="KEYFILE",
                            help="also write OUT.zip.enc, encrypted with the key in KEYFILE (made if missing; an "
                                 "existing KEYFILE must hold a key this option made)")
    check.force_option(autograder)
    autograder.set_defaults(func=_autograder)

    self_check = sub.add_parser("self-check", help="check your notebook without the masters: its visible checks and "
                                                   "its crash matrices on your agents (`make check` in a release)")
    self_check.add_argument("notebook", type=check.notebook_file)
    self_check.add_argument("--timeout", type=check.positive_int, default=120, help="seconds per cell (default %(default)s)")
    self_check.add_argument("--deadline", type=check.positive_seconds, default=900,
                            help="seconds for the whole check (default %(default)s)")
    self_check.set_defaults(func=_self_check)

    batch = sub.add_parser("grade-batch", help="grade one folder per student into a gradebook; resumable")
    batch.add_argument("submissions", type=_folder, metavar="SUBMISSIONS_DIR", help="one folder per student")
    batch.add_argument("--results-dir", type=check.output_folder, required=True, metavar="DIR",
                       help="where each result is kept (run again with the same DIR to resume)")
    batch.add_argument("--csv", type=check.output_file, help="write the gradebook here (a new file, or a gradebook "
                                                             "written before)")
    check.force_option(batch)
    batch.add_argument("--jobs", type=check.jobs, default=2,
                       help=f"notebooks graded at once, at most {check.MAX_JOBS} (default %(default)s)")
    batch.add_argument("--solutions", type=_folder, help="the masters (default: this repository's solutions/)")
    check.grading_options(batch, "each notebook")
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    batch.set_defaults(func=_grade_batch)

    bench = sub.add_parser("bench-grading", help="grading throughput: generated submissions graded with --jobs N "
                                                 "against one by one")
    bench.add_argument("--lesson", default="01", type=check.lesson_number, help="the lesson (default %(default)s)")
    bench.add_argument("--submissions", type=check.positive_int, default=6,
                       help="submissions to generate: masters, stubs and wrong answers in turn (default %(default)s)")
    bench.add_argument("--jobs", type=check.jobs, default=2,
                       help=f"gradings at once, at most {check.MAX_JOBS} (default %(default)s)")
    bench.add_argument("--no-loop", action="store_true", help="skip the one-by-one run")
    bench.add_argument("--json", type=check.output_file, help="also write the figures as JSON")
    check.force_option(bench)
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(func=_bench_grading)
