"""The ``crashlab`` commands for running a graded class, kept apart from :mod:`crashlab.cli` so that file stays
about the world and the harness: ``release``, ``autograder``, ``self-check``, ``grade-batch`` and
``bench-grading``. Each checks its arguments before it starts anything (one ``error:`` line, exit 2)."""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
from pathlib import Path

from crashlab import cli_args as check
from crashlab.cli_args import UsageError


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _lesson_number(text: str) -> str:
    if not re.fullmatch(r"\d\d", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a lesson number: give two digits, such as 01")
    return text


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
    from crashlab.release.bundle import build_autograder, encrypt

    if args.encrypt and shutil.which("openssl") is None:
        raise UsageError("--encrypt needs the openssl command, which is not installed")
    try:
        graded = build_autograder(Path(args.out), args.notebooks)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {args.out}: grades {', '.join(m.name for m in graded)}. It holds the masters: keep it private.")
    if args.encrypt:
        target = encrypt(Path(args.out), Path(args.encrypt))
        print(f"wrote {target}, encrypted with the key in {args.encrypt}: put it at a URL the classroom workflow "
              "can download (secret CRASHLAB_BUNDLE_URL) and the key in the secret CRASHLAB_BUNDLE_KEY")
    return 0


def _self_check(args) -> int:
    from crashlab.grading.report import GradingError
    from crashlab.grading.selfcheck import self_check

    try:
        report = self_check(args.notebook, cell_timeout=args.timeout, deadline=args.deadline)
    except GradingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report)
    print(f"\nself-check {report.score:g} / {report.max_score:g}  ({report.seconds:.0f} s)")
    return 0 if report.score >= report.max_score else 1


def _grade_batch(args) -> int:
    from crashlab.grading.batch import grade_batch, summary, write_gradebook
    from crashlab.grading.report import GradingError

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
    if args.csv:
        write_gradebook(batch, Path(args.csv))
        print(f"wrote {args.csv}")
    return 1 if batch.failed else 0


def _bench_grading(args) -> int:
    from crashlab.grading.throughput import run_throughput

    signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_throughput(args.lesson, submissions=args.submissions, jobs=args.jobs, loop=not args.no_loop,
                                progress=not args.quiet)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(result)
    if args.json:
        result.write_json(args.json)
        print(f"wrote {args.json}")
    return 0


def add_class_commands(sub) -> None:
    release = sub.add_parser("release", help="write the student repository for a graded class: no masters, no "
                                             "hidden checks, no lesson answers")
    release.add_argument("out", type=_new_folder, metavar="OUT_DIR", help="a new or empty folder")
    release.add_argument("--answers-through", type=_lesson_number, metavar="NN",
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
                            help="also write OUT.zip.enc, encrypted with the key in KEYFILE (made if missing)")
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
    batch.add_argument("--csv", type=check.output_file, help="write the gradebook here")
    batch.add_argument("--jobs", type=check.positive_int, default=2, help="notebooks graded at once (default %(default)s)")
    batch.add_argument("--solutions", type=_folder, help="the masters (default: this repository's solutions/)")
    check.grading_options(batch, "each notebook")
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    batch.set_defaults(func=_grade_batch)

    bench = sub.add_parser("bench-grading", help="grading throughput: generated submissions graded with --jobs N "
                                                 "against one by one")
    bench.add_argument("--lesson", default="01", type=_lesson_number, help="the lesson (default %(default)s)")
    bench.add_argument("--submissions", type=check.positive_int, default=6,
                       help="submissions to generate: masters, stubs and wrong answers in turn (default %(default)s)")
    bench.add_argument("--jobs", type=check.positive_int, default=2, help="gradings at once (default %(default)s)")
    bench.add_argument("--no-loop", action="store_true", help="skip the one-by-one run")
    bench.add_argument("--json", type=check.output_file, help="also write the figures as JSON")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(func=_bench_grading)
