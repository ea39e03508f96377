"""The command line, ``crashlab bench`` and ``python -m crashlab.bench``: :func:`main` parses the options
(``--quick`` is :data:`QUICK`), then either runs the whole benchmark and prints, saves and plots its result,
or, given the hidden ``--engine``, is one engine's child process (:mod:`crashlab.bench.child`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from crashlab.bench.child import _child_main
from crashlab.bench.common import engine_rows, variants
from crashlab.bench.lengths import RESULT_BYTES
from crashlab.bench.run import run_benchmark

QUICK = {"steps": 20, "repeats": 1}


def _at_least_two_steps(text: str) -> int:
    from crashlab.cli.args import positive_int

    steps = positive_int(text)
    if steps < 2:
        raise argparse.ArgumentTypeError(f"at least 2 steps (the per-step cost is the difference to a 1-step run), "
                                         f"got {text!r}")
    return steps


MAX_LENGTH = 200  # turns: past it, the long agent's Temporal history nears the server's 50 MB limit


def _lengths(text: str) -> list[int]:
    """``10,30,100`` -> ``[10, 30, 100]``: the length axis, in turns, each 2 to :data:`MAX_LENGTH`."""
    from crashlab.cli.args import positive_int

    found = []
    for part in text.split(","):
        n = positive_int(part.strip())
        if not 2 <= n <= MAX_LENGTH:
            raise argparse.ArgumentTypeError(f"each length is 2 to {MAX_LENGTH} turns, got {part.strip()!r}")
        found.append(n)
    return sorted(set(found))


MAX_RESULT_BYTES = 100_000  # a long tool result; the engines' own payload limits are the rows' to report


def _result_bytes(text: str) -> int:
    from crashlab.cli.args import positive_int

    size = positive_int(text)
    if size > MAX_RESULT_BYTES:
        raise argparse.ArgumentTypeError(f"at most {MAX_RESULT_BYTES} bytes a result, got {text!r}")
    return size


def main(argv: list[str] | None = None) -> int:
    from crashlab.cli import args as check

    t_main = time.time()
    parser = check.Parser(prog="crashlab bench",
                          description="Per-step cost of each durable engine against an fsync floor, "
                                      "and recovery time after SIGKILL.")
    parser.add_argument("--quick", action="store_true", help=f"steps={QUICK['steps']}, repeats={QUICK['repeats']}")
    parser.add_argument("--steps", type=_at_least_two_steps, default=None, help="steps per workflow, 2 or more (default 50)")
    parser.add_argument("--repeats", type=check.positive_int, default=None,
                        help="runs per engine; the median is kept (default 3)")
    parser.add_argument("--engines", type=check.names_from(variants(), "engine"), default=None,
                        help=f"comma-separated, from {','.join(variants())} (default: {','.join(engine_rows())})")
    parser.add_argument("--no-recovery", action="store_true", help="skip the SIGKILL recovery scene")
    parser.add_argument("--lengths", type=_lengths, default=None,
                        help="the length axis: each engine's long agent at these turns, comma-separated (10,30,100): "
                             "its record's bytes per turn, growth exponent and recovery after SIGKILL at each")
    parser.add_argument("--result-bytes", type=_result_bytes, default=RESULT_BYTES,
                        help=f"the long agent's result per turn, in bytes (default {RESULT_BYTES})")
    parser.add_argument("--timeout", type=check.positive_seconds, default=180.0, help="seconds allowed per process")
    parser.add_argument("--workdir", type=check.output_folder, default=None,
                        help="keep the files here (default: a temporary directory)")
    parser.add_argument("--json", type=check.output_file, default=None, help="write the results here")
    parser.add_argument("--plot", type=check.plot_file, default=None,
                        help=f"save the bar chart here ({', '.join(check.PLOT_SUFFIXES)})")
    check.force_option(parser)
    parser.add_argument("--engine", choices=variants(), default=None, help=argparse.SUPPRESS)  # one engine, in this process
    parser.add_argument("--phase", choices=["crash", "resume"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--wid", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-result-bytes", dest="child_result_bytes", type=check.non_negative_int, default=0,
                        help=argparse.SUPPRESS)  # a recovery scene's child: its long agent's result size, 0 for none
    parser.add_argument("--max-seconds", type=check.positive_seconds, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from crashlab.plumbing.outputs import BENCH, PLOT, OutputError, check_replaceable, write_output

    try:
        for path, kind in ((args.json, BENCH), (args.plot, PLOT)):
            if path:
                check_replaceable(path, kind, force=args.force)
    except OutputError as exc:
        parser.exit(2, f"error: {exc}\n")
    steps = args.steps or (QUICK["steps"] if args.quick else 50)
    repeats = args.repeats or (QUICK["repeats"] if args.quick else 3)
    if args.engine:
        if args.phase and not (args.workdir and args.wid):
            parser.error("--phase needs --workdir and --wid")
        args.steps, args.repeats = steps, repeats
        return _child_main(args, t_main)
    result = run_benchmark(steps=steps, repeats=repeats, engines=args.engines, workdir=args.workdir,
                           progress=sys.stderr.isatty(), recovery=not args.no_recovery, timeout_s=args.timeout,
                           lengths=args.lengths, result_bytes=args.result_bytes)
    print(result.table())
    try:
        if args.json:
            write_output(args.json, json.dumps(result.as_dict(), indent=2) + "\n", BENCH, force=args.force)
        if args.plot:
            _save_plot(result, args.plot, force=args.force)
    except OutputError as exc:  # the file appeared while the benchmark ran
        print(f"error: {exc}; the results are above", file=sys.stderr)
        return 1
    return 0


def _save_plot(result, path: str, force: bool) -> None:
    """The bar chart, saved beside ``path`` and moved over it: it replaces only an earlier plot (see
    :mod:`crashlab.plumbing.outputs`)."""
    from crashlab.plumbing.outputs import PLOT, replace_with

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes: Any
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.6)) if result.recovery else plt.subplots(figsize=(7, 4.6))
    if result.recovery:
        result.plot(axes[0])
        result.plot_recovery(axes[1])
    else:
        result.plot(axes)
    fig.tight_layout()
    fd, made = tempfile.mkstemp(prefix=".crashlab-", suffix=Path(path).suffix, dir=Path(path).absolute().parent)
    os.close(fd)
    fig.savefig(made, dpi=110)
    os.chmod(made, 0o644)
    replace_with(made, path, PLOT, force=force)
