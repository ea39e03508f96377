"""The ``crashlab`` command: the world, the crash harness, building and grading notebooks, the demo."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from crashlab.cli import args as check
from crashlab.cli.args import Parser, UsageError
from crashlab.course.metadata import DemoAgent, Expect, LauncherKind
from crashlab.errors import CrashlabError
from crashlab.cli.world import audit_order, start_world, stop_world
from crashlab.engines.needs import needs_of
from crashlab.engines.registry import ENGINES, with_server
from crashlab.plumbing.outputs import DEMO, MATRIX, REPORT, RESULTS, SOAK, OutputError
from crashlab.order import ORDER_ID, TOOL_ORDER

if TYPE_CHECKING:  # the soak is imported when a soak runs
    from crashlab.soak.world import WorldFault


def _check_crash_test(args) -> None:
    if args.preload and args.launcher != "warm":
        raise UsageError("--preload only applies to --launcher warm (the exec launcher starts a new interpreter "
                         "each time): drop --preload or use --launcher warm")
    repeated = sorted({tool for tool in args.lost_ack if args.lost_ack.count(tool) > 1})
    if repeated:
        raise UsageError(f"--lost-ack {repeated[0]} is given twice: the fault drops the first reply of a tool once")
    from crashlab.harness import double_crash_pairs

    most = len(double_crash_pairs(None, fail=args.fail))  # the pairs of the path the rows take
    if args.double > most:
        path = f"the failure path of --fail {args.fail}" if args.fail else "the order"
        raise UsageError(f"{path} has {most} double crashes (a first crash, then one at a later tool), got "
                         f"--double {args.double}")
    check.check_not_same_file(args.json, args.agent, "agent file")
    check.check_output(args.json, MATRIX, args.force)


def _crash_test(args) -> int:
    _check_crash_test(args)
    from crashlab.harness import crash_test, double_crash_pairs

    try:
        matrix = crash_test(args.agent, args.points, args.order, expect=args.expect, jobs=args.jobs,
                            timeout=args.timeout, progress=not args.quiet, resumers=args.resumers,
                            double=double_crash_pairs(args.double, fail=args.fail) if args.double else None,
                            faults=[(f"lost_ack:{tool}", 1, None) for tool in args.lost_ack] or None,
                            launcher=args.launcher, preload=tuple(args.preload), fail=args.fail,
                            key_lifetime=args.key_lifetime)
    except (FileNotFoundError, ValueError, CrashlabError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(matrix)
    print(f"\n{len(matrix.rows)} runs in {matrix.seconds:.1f} s")
    if not _write_json(matrix, args, "the matrix"):
        return 1
    return 0 if matrix.ok or args.expect == "observe" else 1


def _write_json(result, args, what: str) -> bool:
    """Write ``result``'s JSON to ``args.json`` (if given) after its text was printed; False, with one line
    saying so, when the file cannot be written or is no longer one it may replace (:mod:`crashlab.plumbing.outputs`)."""
    path = args.json
    if not path:
        return True
    try:
        result.write_json(path, force=args.force)
    except OutputError as exc:
        print(f"error: {exc}; {what} is above", file=sys.stderr)
        return False
    except OSError as exc:
        print(f"error: could not write {path} ({exc.strerror}); {what} is above", file=sys.stderr)
        return False
    print(f"wrote {path}")
    return True


def _resumer_range(text: str) -> tuple[int, int]:
    from crashlab.soak import parse_resumers

    try:
        return parse_resumers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _world_faults(text: str) -> list[WorldFault]:
    from crashlab.soak.world import parse_world_faults

    try:
        return parse_world_faults(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _reference(text: str) -> tuple[Path, DemoAgent]:
    from crashlab.soak.reference import reference_spec

    try:
        return reference_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _soak(args) -> int:
    if (args.agent is None) == (args.reference is None):
        raise UsageError("give an agent file or --reference LESSON (a lesson's reference agent), not both" if
                         args.agent else "give an agent file, or --reference LESSON for a lesson's reference agent")
    spec = args.reference[1] if args.reference else {}
    # a reference saga is soaked down the failure path its lesson gives it, unless told otherwise (--fail none)
    fail = None if args.fail == "none" else args.fail or spec.get("fail")
    launcher = args.launcher or spec.get("launcher", "warm")
    preload = tuple(dict.fromkeys([*spec.get("preload", ()), *args.preload]))
    needs = needs_of([*needs_of(spec), *args.needs])
    if args.preload and launcher != "warm":
        raise UsageError("--preload only applies to --launcher warm: drop --preload or use --launcher warm")
    if args.agent:
        check.check_not_same_file(args.json, args.agent, "agent file")
    check.check_output(args.json, SOAK, args.force)
    if args.orders is None and args.seconds is None:
        args.orders = 20
    from crashlab.plumbing.scratch import scratch_dir
    from crashlab.soak import soak
    from crashlab.soak.reference import write_reference

    try:
        with scratch_dir("crashlab-reference-") as folder:
            agent = write_reference(args.reference[0], args.reference[1], folder) if args.reference else args.agent
            result = soak(agent, args.orders, resumers=args.resumers, kills=args.kills, kill_window=args.kill_window,
                          world_faults=args.world_faults, seconds=args.seconds, seed=args.seed, jobs=args.jobs,
                          timeout=args.timeout, max_rounds=args.max_rounds, launcher=launcher, preload=preload,
                          needs=needs, progress=False if args.quiet else None, key_lease=args.key_lease, fail=fail,
                          may_undo=args.may_undo, env=dict(args.env))
    except (FileNotFoundError, ValueError, CrashlabError) as exc:  # a server that cannot start, too: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result)
    if not _write_json(result, args, "the summary"):
        return 1
    return 0 if result.ok else 1


def _grade(args) -> int:
    check.check_not_same_file(args.json, args.notebook, "notebook")
    check.check_output(args.json, RESULTS, args.force)
    from crashlab.grading.grade import grade_notebook

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    try:
        report = grade_notebook(args.notebook, json_out=args.json, cell_timeout=args.timeout, keep=args.keep,
                                deadline=args.deadline, isolate=False if args.no_isolate else None,
                                force_json=args.force,
                                progress=None if args.quiet else lambda stage: print(stage, file=sys.stderr, flush=True))
    except CrashlabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grading interrupted: no score was written", file=sys.stderr)
        return 130
    print(report)
    print(f"\nscore {report.score:g} / {report.max_score:g}  ({report.seconds:.0f} s)")
    if args.json:
        print(f"wrote {args.json}")
    return 0


def _demo(args) -> int:
    check.check_folder_writable(".", "the demo writes crashlab-demo.html here")
    if Path("crashlab-demo.html").is_dir():
        raise UsageError("crashlab-demo.html here is a folder: the demo writes its report there; move it")
    check.check_output("crashlab-demo.html", REPORT, args.force)
    check.check_output(args.json, DEMO, args.force)
    from crashlab.report.demo import run_demo

    return run_demo(jobs=args.jobs, json_out=args.json, force=args.force, parallel=args.parallel,
                    beside=None if args.no_long else _long_agents)


DEMO_LENGTH = 30  # turns of each engine's long agent in the demo: one length, one crash and resume per engine


def _long_agents() -> tuple[str, str]:
    """The demo's long-agent rows, one per engine: the benchmark's length axis at :data:`DEMO_LENGTH` turns."""
    from crashlab.bench import run_long_agents

    result = run_long_agents([DEMO_LENGTH], progress=False)
    return f"The long agent: {DEMO_LENGTH} turns on every engine", result.long_table()


def build_parser() -> Parser:
    parser = Parser(prog="crashlab", description="Durable execution for AI agents: the course's tools.")
    sub = parser.add_subparsers(dest="command", required=True)

    world = sub.add_parser("world", help="start or stop the local world (model server and services)")
    world_sub = world.add_subparsers(dest="action", required=True)
    start = world_sub.add_parser("start", help="start a world on 127.0.0.1")
    start.add_argument("--state", type=check.state_folder, default=".crashlab/world",
                       help="state directory (default %(default)s)")
    start.add_argument("--port", type=check.port, default=0, help="port, 1 to 65535 (default: any free one)")
    start.add_argument("--keep", action="store_true",
                       help="restart the world on its own state in --state: ledgers, armed faults and agents' state kept")
    start.add_argument("--key-lease", type=check.positive_seconds, default=None,
                       help="seconds an idempotency key stays claimed by a request that never completes "
                            "(a world killed mid-request) before another request may take it over (default 5)")
    start.add_argument("--key-lifetime", type=check.positive_seconds, default=None,
                       help="seconds after its first use that a completed idempotency key is forgotten, as payment "
                            "providers forget keys after about a day (default: never); a retry after that is a new effect")
    start.add_argument("--detach", action="store_true", help="return at once and leave the world running")
    start.set_defaults(func=start_world)
    stop = world_sub.add_parser("stop", help="stop a world started with --detach")
    stop.add_argument("--state", type=check.state_folder, default=".crashlab/world")
    stop.set_defaults(func=stop_world)

    audit = sub.add_parser("audit", help="what the world saw for an order")
    audit.add_argument("--state", type=check.state_folder, default=".crashlab/world")
    audit.add_argument("--order", type=check.order_id, default=ORDER_ID, help="order id (default %(default)s)")
    audit.add_argument("--json", action="store_true")
    audit.set_defaults(func=audit_order)

    crash = sub.add_parser("crash-test", help="run an agent file through the crash matrix")
    crash.add_argument("agent", type=check.agent_file, help="the agent file, run as `python AGENT --order ID`")
    crash.add_argument("--points", type=check.crash_points, default="all",
                       help=f"'all' or a comma-separated list of {check.CRASH_POINT_FORMS}")
    crash.add_argument("--order", type=check.order_id, default=ORDER_ID, help="order id (default %(default)s)")
    crash.add_argument("--expect", default="durable", choices=get_args(Expect))
    crash.add_argument("--jobs", type=check.jobs, default=2,
                       help=f"rows run at once, at most {check.MAX_JOBS} (default %(default)s)")
    crash.add_argument("--timeout", type=check.positive_seconds, default=60,
                       help="seconds before a run counts as hung (default %(default)s)")
    crash.add_argument("--resumers", type=check.resumer_count, default=1,
                       help="resume processes started at once after a crash (default %(default)s)")
    crash.add_argument("--double", type=check.non_negative_int, default=0, metavar="N",
                       help="also N sampled double crashes (a second crash during the resume)")
    crash.add_argument("--lost-ack", type=check.tool_name, action="append", default=[], metavar="TOOL",
                       help="the service commits TOOL's first call and drops the reply (repeatable; "
                            f"TOOL is one of {', '.join(TOOL_ORDER)})")
    crash.add_argument("--fail", type=check.failure, metavar="STEP",
                       help="run the failure path: STEP fails for good in every row (reserve_item, "
                            "reserve_item:out_of_stock, card_declined...), 'all' points then include the undo steps, "
                            "and each row must end cleanly undone")
    crash.add_argument("--key-lifetime", type=check.positive_seconds, default=None, metavar="SECONDS",
                       help="each row's world forgets an idempotency key SECONDS after its first use, and the resume "
                            "starts after that (the key-lifetime trap; default: keys are never forgotten)")
    crash.add_argument("--launcher", choices=get_args(LauncherKind), default="warm",
                       help="warm: fork each process from a pre-warmed interpreter; exec: a new interpreter each time")
    crash.add_argument("--preload", type=check.module_name, action="append", default=[], metavar="MODULE",
                       help="extra modules the warm launcher imports before forking (repeatable)")
    crash.add_argument("--json", type=check.output_file, help="also write the matrix as JSON to this file")
    check.force_option(crash)
    crash.add_argument("--quiet", action="store_true", help="no progress bar")
    crash.set_defaults(func=_crash_test)

    soak = sub.add_parser("soak", help="the chaos soak: many orders, random SIGKILLs, racing resumers, world faults, "
                                       "then an audit of every order")
    soak.add_argument("agent", type=check.agent_file, nargs="?", help="the agent file, run as `python AGENT --order ID`")
    soak.add_argument("--reference", type=_reference, metavar="LESSON[:AGENT]",
                      help="instead of a file, a lesson's reference agent from its master notebook (02, 03, 04, 05: "
                           "the durable one; 02:uuid_agent.py names another), with the modules and servers it needs")
    soak.add_argument("--orders", type=check.soak_orders, default=None,
                      help="orders to run, ORD-SOAK-0001 on, at most 9999 (default 20; with --seconds, as many as "
                           "start in that time, up to 9999)")
    soak.add_argument("--seconds", type=check.positive_seconds, default=None,
                      help="stop starting new orders after this many seconds")
    soak.add_argument("--resumers", type=_resumer_range, default=(2, 3), metavar="A..B",
                      help="resume processes started at once after a kill, between A and B (default 2..3)")
    soak.add_argument("--kills", choices=["random", "none"], default="random",
                      help="random: SIGKILL the first run, and resumers of the first rounds at even odds, at a "
                           "random moment (default)")
    soak.add_argument("--kill-window", type=check.positive_seconds, default=None, metavar="SECONDS",
                      help="a kill lands uniformly between 0 and this many seconds after a start (default: the time "
                           "of one clean run of the agent, made first)")
    soak.add_argument("--world-faults", type=_world_faults, default=[], metavar="FAULTS",
                      help="comma-separated: world-kill (SIGKILL the world's server, restart it on its state), "
                           "outage:SECONDS (stop it that long, then restart it on its state), flaky:SECONDS (for that "
                           "long every service answers 503 and the model 529, doing nothing); each at a random "
                           "moment, or with @TOOL as soon as the order it falls to has TOOL's effect "
                           "(outage:200@charge_card). A process running when a fault begins is not killed after")
    soak.add_argument("--seed", type=check.non_negative_int, default=None, help="for a soak you can run again")
    soak.add_argument("--jobs", type=check.jobs, default=2,
                      help=f"orders run at once, at most {check.MAX_JOBS} (default %(default)s)")
    soak.add_argument("--timeout", type=check.positive_seconds, default=60,
                      help="seconds before a process counts as hung, not counting the time the world is killed, down "
                           "or flaky (default %(default)s)")
    soak.add_argument("--max-rounds", type=check.positive_int, default=12,
                      help="rounds of resumers before an unfinished order counts as lost (default %(default)s)")
    soak.add_argument("--key-lease", type=check.positive_seconds, default=None,
                      help="the world's idempotency-key lease in seconds (default 5): how long a key claimed by a "
                           "request that died with the world stays in flight")
    soak.add_argument("--launcher", choices=get_args(LauncherKind), default=None,
                      help="warm: fork each process from a pre-warmed interpreter (default); exec: a new interpreter "
                           "each time")
    soak.add_argument("--preload", type=check.module_name, action="append", default=[], metavar="MODULE",
                      help="extra modules the warm launcher imports before forking (repeatable)")
    soak.add_argument("--needs", choices=with_server(), action="append", default=[],
                      help="a server the agent needs besides the world, started for the soak (" +
                           "; ".join(f"{name}: {ENGINES[name].title}'s" for name in with_server()) + "; repeatable)")
    soak.add_argument("--fail", type=check.failure_or_none, metavar="STEP",
                      help="soak the failure path: STEP fails for good for every order (reserve_item, card_declined"
                           "...), and each order must end cleanly undone (default: the --reference agent's own, if any;"
                           " none: the order's own path, for a reference saga)")
    soak.add_argument("--env", type=check.env_setting, action="append", default=[], metavar="NAME=VALUE",
                      help="a variable for every agent process, such as a retry budget scaled down "
                           "(SAGA_PATIENCE_S=3); repeatable")
    soak.add_argument("--may-undo", action="store_true",
                      help="an order may end cleanly undone instead of finished (counted apart): a saga whose do "
                           "steps give up after a time, soaked with faults longer than that")
    soak.add_argument("--json", type=check.output_file, help="also write the figures as JSON to this file")
    check.force_option(soak)
    soak.add_argument("--quiet", action="store_true", help="no progress bar")
    soak.set_defaults(func=_soak)

    grade = sub.add_parser("grade", help="grade a notebook")
    grade.add_argument("notebook", type=check.existing_file)
    grade.add_argument("--json", type=check.output_file, help="write Gradescope-shaped results here")
    check.force_option(grade)
    check.grading_options(grade, "the whole submission")
    grade.add_argument("--keep", action="store_true", help="keep the scratch directory")
    grade.add_argument("--quiet", action="store_true", help="print only the table: no stage or progress bar")
    grade.set_defaults(func=_grade)

    sub.add_parser("bench", help="the cost of durability: per-step cost of each engine against an fsync floor "
                                 "(options: crashlab bench --help)")

    demo = sub.add_parser("demo", help="the course's main job: reference agents through the crash matrix")
    demo.add_argument("--jobs", type=check.jobs, default=2,
                      help="rows of one matrix run at once (default %(default)s)")
    demo.add_argument("--parallel", type=check.jobs, default=2,
                      help="matrices run at once, the longest first (default %(default)s; 1: one after another)")
    demo.add_argument("--json", type=check.output_file, help="also write the matrices as JSON to this file")
    demo.add_argument("--no-long", action="store_true",
                      help="leave out the long-agent rows (each engine's long agent, crashed and resumed, beside the "
                           "matrices)")
    check.force_option(demo)
    demo.set_defaults(func=_demo)

    from crashlab.cli.classroom import add_class_commands  # build, execute, result, classroom, release, autograder, ...

    add_class_commands(sub)
    return parser


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from crashlab.plumbing.startup import skip_unused_slow_imports

    skip_unused_slow_imports()  # nothing the command does checks "iri" strings
    from crashlab.plumbing.scratch import sweep_scratch

    sweep_scratch()  # what an earlier command killed by SIGKILL could not remove
    if argv[:1] == ["bench"]:  # all of its options belong to crashlab.bench
        from crashlab.cli.bench import main as bench_main

        return bench_main(argv[1:])
    args = build_parser().parse_args(argv)
    # SIGTERM (a CI runner's cancel, `kill`) stops a command as Ctrl-C does, so its cleanup runs: the worlds,
    # agent processes and scratch folders it made go with it. Commands may install their own handler.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return args.func(args)
    except CrashlabError as exc:  # a usage error, or any command's: what went wrong and what to do, in one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a full disk is said as such, wherever the command was writing
        from crashlab.plumbing.diskfull import disk_full, full_disk_message

        if not disk_full(exc):
            raise
        print(f"error: {full_disk_message(_where(exc), exc)}", file=sys.stderr)
        return 1


def _where(exc: BaseException) -> str:
    """What could not be written, as the error names it."""
    cause: BaseException | None = exc
    while cause is not None:
        if getattr(cause, "filename", None):
            return f"cannot write {getattr(cause, 'filename')}"
        cause = cause.__cause__ or cause.__context__
    return "cannot write"


if __name__ == "__main__":
    sys.exit(main())
