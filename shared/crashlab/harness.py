"""The crash harness: kill an agent at a named point, resume it in a new process, audit the world.

For each crash point the harness starts a fresh world, arms the crash point *in the world*, runs
``python AGENT.py --order ID`` (which is told nothing), and lets the world kill the agent's process
group when it sees the request for that point. It then runs the same command again as a brand-new
process and audits the world's ledgers. Whether a point was reached is what the world saw; a crash
point that was never reached is a failure, not a pass.

Whatever an agent does, a row ends: every kill takes the agent's process group and everything it
started (:mod:`crashlab.processes`), no wait is without a timeout, and every scratch folder the
harness made is removed when its run ends, also on an error or Ctrl-C (:mod:`crashlab.scratch`).
On Ctrl-C (or SIGTERM, in the CLI) the rows under way do not run on to their timeout: their agent
processes are killed at once, and no row starts another (:class:`_Rows`).

The failure path (``fail="reserve_item"``, say): every row's world is told first that the step fails for good
for the order, and a correct agent undoes what it did -- the points are those of the do steps up to the failure
and of the undo steps (:func:`crashlab.order.failure_points`), and the expected end is ``cleanly undone``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.audit import Audit, Event
from crashlab import processes, sandbox as sandboxes
from crashlab.launcher import WarmLauncher
from crashlab.order import (ORDER_ID, TOOL_ORDER, check_crash_point, check_failure, default_points, failure_path,
                            failure_points)
from crashlab.scratch import remove_scratch
from crashlab.world import World

# What a correct agent must show at each crash point, by name.
EXPECTATIONS = {
    "durable": "0 duplicates, finished, no repeated model call except one at after:model#N",
    "no-repeats": "finished, no repeated model call except one at after:model#N (duplicates allowed)",
    "observe": "no verdict: report what happens",
}
# The same, through the failure path: the order is to end cleanly undone, not finished.
FAILURE_EXPECTATIONS = {
    "durable": "0 duplicates, cleanly undone, no repeated model call except one at after:model#N",
    "no-repeats": "cleanly undone, no repeated model call except one at after:model#N (duplicates allowed)",
    "observe": "no verdict: report what happens",
}
BASELINE = "(no crash)"


@dataclass
class ProcessRun:
    """One agent process, seen from outside."""

    pid: int
    returncode: int | None
    started: float
    ended: float
    stdout: str
    stderr: str
    timed_out: bool = False
    crashed_at: str | None = None  # the crash point the world saw this process reach, if any

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    def last_error_line(self) -> str:
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return lines[-1].strip() if lines else f"exit code {self.returncode}"


@dataclass
class Row:
    point: str
    reached: bool
    effects: dict
    duplicates: int
    model_calls: int
    repeated_model_calls: int
    finished: bool
    recovery_s: float | None
    problems: list[str] = field(default_factory=list)
    runs: list[ProcessRun] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    verdict: str | None = None  # through the failure path: the audit's verdict (finished = cleanly undone)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"point": self.point, "reached": self.reached, "effects": self.effects,
                "duplicates": self.duplicates, "model_calls": self.model_calls,
                "repeated_model_calls": self.repeated_model_calls, "finished": self.finished,
                "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 3),
                "ok": self.ok, "problems": self.problems,
                "runs": [{"pid": r.pid, "returncode": r.returncode, "seconds": round(r.seconds, 3),
                          "timed_out": r.timed_out} for r in self.runs]} | ({} if self.verdict is None else
                                                                             {"verdict": self.verdict})


def run_python(args: list[str], env: dict | None = None, timeout: float = 60.0,
               cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``python ARGS...`` as a new process that runs a learner's code: in a session of its own, and as
    the sandbox user while grading as root. Use it instead of ``subprocess.run([sys.executable, ...])``."""
    env = sandboxes.child_env(dict(os.environ if env is None else env))
    process = subprocess.Popen([sys.executable, *map(str, args)], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                               preexec_fn=sandboxes.preexec())
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.kill_tree(process.pid)
        stdout, stderr = processes.collect(process)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def run_agent(agent: str | Path, world: World, order_id: str = ORDER_ID, *, crash_at: str | None = None,
              timeout: float = 60.0, extra_env: dict | None = None,
              launcher: WarmLauncher | None = None, args: list[str] | None = None) -> ProcessRun:
    """Run ``python AGENT --order ORDER_ID`` once as a new process, in the agent file's directory.

    With ``crash_at`` the world is armed first, and kills the process when it sees the request for that
    point; ``ProcessRun.crashed_at`` then says what the world saw. With a
    :class:`~crashlab.launcher.WarmLauncher` the process is forked from a warm interpreter instead of
    starting a new one; either way it is a new process that is killed for real.
    """
    if not crash_at:
        return start_agent(agent, world, order_id, extra_env=extra_env, launcher=launcher, args=args).finish(timeout)
    # A crashed run takes every process it started with it, as a machine that crashes does (see
    # crashlab.sandbox.crash_user): nothing it forked off can finish the order behind the resume's back.
    with sandboxes.crash_user(hand_back=(world.agent_dir, Path(agent).resolve().parent)):
        world.arm_crash(crash_at)
        try:
            running = start_agent(agent, world, order_id, extra_env=extra_env, launcher=launcher, args=args)
            run = running.finish(timeout, crash_world=world)
        finally:
            world.arm_crash(None)
            sandboxes.kill_crashed()
    return run


class RowsStopped(RuntimeError):
    """The crash test is being stopped (Ctrl-C): its rows start no more agent processes."""


class _Rows:
    """The agent processes that one crash test's rows have running, so that Ctrl-C can end them all at once.

    Each row runs in a worker thread that knows its crash test through :data:`_row_context`; every agent it
    starts (:func:`start_agent`) is registered here until it has been waited for."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[_Running] = set()
        self.stopped = False

    def run(self, function, *args, **kwargs):
        """Call ``function`` in this thread as a row of this crash test."""
        _row_context.rows = self
        try:
            return function(*args, **kwargs)
        finally:
            _row_context.rows = None

    def add(self, running: "_Running") -> bool:
        """Register a process just started; False if the crash test is being stopped (the caller ends it)."""
        with self._lock:
            if not self.stopped:
                self._running.add(running)
            return not self.stopped

    def discard(self, running: "_Running") -> None:
        with self._lock:
            self._running.discard(running)

    def stop(self) -> None:
        """Kill every agent process the rows have running (each with its group), and let no row start another:
        the rows then end within moments, instead of running on to their timeout."""
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for each in running:
            each.kill()


_row_context = threading.local()


def _current_rows() -> _Rows | None:
    return getattr(_row_context, "rows", None)


class _Running:
    """An agent process that has been started and not yet waited for."""

    def __init__(self, process, started: float, output_dir: Path | None):
        self.process, self.started, self.output_dir = process, started, output_dir
        self.rows = _current_rows()
        if self.rows is not None and not self.rows.add(self):  # started as the crash test was being stopped
            self.finish(0)  # killed, waited for, its output folder removed
            raise RowsStopped("the crash test was stopped")

    def finish(self, timeout: float, crash_world: World | None = None) -> ProcessRun:
        """Wait for the process (its whole group dies at ``timeout``). With ``crash_world``, watch the
        world: once it reports the armed point reached, make sure the process group is dead."""
        timed_out, crashed = False, None
        deadline = self.started + timeout
        try:
            while self.process.poll() is None:
                if time.time() > deadline:
                    timed_out = True
                    break
                if crash_world is not None and crashed is None:
                    crashed = crash_world.crash_reached()
                    if crashed:
                        break
                self._wait(0.05 if crash_world is not None else min(0.5, max(0.01, deadline - time.time())))
        finally:  # also on an error or Ctrl-C: nothing is left running, and every wait below is bounded
            if self.process.poll() is None:
                self.kill()
            self._wait(30)
            stdout, stderr = self._output()
            if self.rows is not None:
                self.rows.discard(self)
        ended = time.time()
        if crash_world is not None and crashed is None:
            crashed = crash_world.crash_reached()
        return ProcessRun(self.process.pid, self.process.returncode, self.started, ended, stdout, stderr,
                          timed_out, crashed["point"] if crashed else None)

    def running(self) -> bool:
        """True until the process has exited (or been killed)."""
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the process and its whole group now, and every process below it even in a group of its
        own: a crash from outside, at a moment you choose."""
        if self.process.returncode is None:  # never signal an id the system may have given to another process
            processes.kill_tree(self.process.pid)

    def _wait(self, seconds: float) -> None:
        try:
            self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            pass

    def _output(self) -> tuple[str, str]:
        """What the process wrote, read within a bounded time; its scratch folder is removed."""
        if isinstance(self.process, subprocess.Popen):
            return processes.collect(self.process)
        try:
            return self.process.output()
        finally:
            remove_scratch(self.output_dir)


def start_agent(agent: str | Path, world: World, order_id: str = ORDER_ID, *, extra_env: dict | None = None,
                launcher: "WarmLauncher | str | None" = None, args: list[str] | None = None) -> _Running:
    """Start one agent process in a process group of its own (as the sandbox user while grading).
    ``launcher``: a :class:`~crashlab.launcher.WarmLauncher`, or None (or ``"exec"``) for a new interpreter.
    ``args`` replaces the default command line ``--order ORDER_ID``."""
    agent = Path(agent).resolve()
    argv = [str(a) for a in args] if args is not None else ["--order", order_id]
    env = sandboxes.child_env(world.env(**(extra_env or {})))
    started = time.time()
    if isinstance(launcher, str) and launcher != "exec":
        raise ValueError("launcher must be a WarmLauncher, 'exec' or None here")
    rows = _current_rows()
    if rows is not None and rows.stopped:
        raise RowsStopped("the crash test was stopped")
    if launcher is None or launcher == "exec":
        process = subprocess.Popen([sys.executable, str(agent), *argv], cwd=agent.parent, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                   start_new_session=True, preexec_fn=sandboxes.preexec())
        return _Running(process, started, None)
    output_dir = Path(tempfile.mkdtemp(prefix="agent-output-"))  # removed by _Running.finish()
    try:
        sandboxes.give(output_dir)
        process = launcher.spawn([str(agent), *argv], agent.parent, env, output_dir / "stdout",
                                 output_dir / "stderr")
    except BaseException:
        remove_scratch(output_dir)
        raise
    return _Running(process, started, output_dir)


def judge(point: str, audit: Audit, reached: bool, last: ProcessRun | None, expect: str,
          fail: str | None = None) -> list[str]:
    """The problems at one crash point, each naming the point and what went wrong. With ``fail`` (the step that
    fails for good) the order must end cleanly undone instead of finished."""
    if not reached:
        return []  # already reported by the caller
    problems = []
    if last is not None and last.timed_out:
        problems.append(f"{point}: the resumed agent hung and was killed after its timeout")
    elif last is not None and last.returncode != 0:
        problems.append(f"{point}: the resumed agent failed ({last.last_error_line()})")
    if expect == "observe":
        return problems
    allowed = 1 if point.startswith("after:model#") else 0
    if audit.repeated_model_calls > allowed:
        problems.append(f"{point}: {audit.repeated_model_calls} repeated model call(s) -- the model was asked "
                        f"again for an answer that was already recorded" + (" (1 is the unavoidable window here)"
                                                                             if allowed else ""))
    turns = len(TOOL_ORDER) + 1  # one model call per tool, then the final answer
    if fail is not None:  # one per do step up to the failure, at most one per undo step, and the final answer
        turns = sum(map(len, failure_path(check_failure(fail)[0]))) + 1
    if audit.model_calls > turns + allowed and audit.repeated_model_calls <= allowed:
        problems.append(f"{point}: {audit.model_calls} model calls for a {turns}-turn order -- the model was asked "
                        f"again for turns it had already answered (a reworded conversation is still a repeat)")
    if expect == "durable" and audit.duplicates:
        problems.append(f"{point}: " + ", ".join(audit.duplicate_findings()))
    if fail is not None:
        if audit.verdict != "cleanly undone":
            if audit.verdict == "completed":
                why = f"{fail} failed for good, yet the order completed"
            else:
                why = "; ".join(audit.inconsistencies) or "the world did nothing for it, not even a cancellation"
            problems.append(f"{point}: the order was not cleanly undone ({audit.verdict}: {why})")
    elif not audit.finished:
        what = f"missing {', '.join(audit.missing)}" if audit.missing else "the model never gave its final answer"
        problems.append(f"{point}: the order did not finish ({what})")
    return problems


def crash_row(agent: str | Path, point: str, order_id: str = ORDER_ID, *, expect: str = "durable",
              workdir: Path | None = None, timeout: float = 60.0, keep: bool = False, resumers: int = 1,
              then_crash_at: str | None = None, faults: list[tuple] | None = None, extra_env: dict | None = None,
              launcher: "WarmLauncher | str | None" = None, fail: str | None = None) -> Row:
    """One row of the matrix: a fresh world, a crash at ``point`` (or none for the baseline), a resume.

    - ``resumers``: how many resume processes start at once after the crash (they race);
    - ``then_crash_at``: a second crash point for the first resume (a double crash), then a clean resume;
    - ``faults``: ``(name, times, arg)`` faults armed in the world first, e.g. ``("lost_ack:charge_card", 1, None)``;
    - ``launcher``: a running :class:`~crashlab.launcher.WarmLauncher`, or None (or ``"exec"``) for a new
      interpreter per process;
    - ``fail``: ``TOOL`` or ``TOOL:REASON``, a step told to fail for good for the order before the first run
      (the failure path: the order must end cleanly undone).
    """
    base = Path(tempfile.mkdtemp(prefix="row-", dir=workdir))
    try:
        with sandboxes.crash_user(home=base):  # while grading: the row's processes, all killed after each crash
            return _crash_row(agent, point, base, order_id, expect, timeout, resumers, then_crash_at, faults,
                              extra_env, launcher, fail)
    finally:
        if not keep:
            remove_scratch(base)


def _crash_row(agent, point, base, order_id, expect, timeout, resumers, then_crash_at, faults, extra_env,
               launcher, fail=None) -> Row:
    failing = check_failure(fail) if fail is not None else None  # before any world starts
    sandboxes.give(base)
    world = World.start(base / "world")
    label = point if then_crash_at is None else f"{point} + {then_crash_at}"
    try:
        if failing is not None:
            world.fail_permanently(order_id, *failing)
        for name, times, arg in faults or []:
            world.inject(name, times, arg)
        runs: list[ProcessRun] = []
        problems: list[str] = []
        reached = True
        crashes = [p for p in (point, then_crash_at) if p and p != BASELINE]
        for number, crash_point in enumerate(crashes):
            run = run_agent(agent, world, order_id, crash_at=crash_point, timeout=timeout, extra_env=extra_env,
                            launcher=launcher)
            runs.append(run)
            if run.crashed_at != crash_point:
                reached = False
                if run.timed_out:
                    why = "the agent hung before reaching it"
                elif run.returncode == 0:
                    why = "the agent finished without passing through it"
                else:
                    why = f"the agent failed first: {run.last_error_line()}"
                which = "crash point" if number == 0 else "second crash point (during the resume)"
                problems.append(f"{crash_point}: {which} never reached ({why})")
                break
        recovery = None
        last = runs[-1] if runs else None
        if reached:
            count = 1 if point == BASELINE else max(1, resumers)  # the baseline is one clean run
            resumes = _resume(agent, world, order_id, count, timeout, extra_env, launcher)
            sandboxes.kill_crashed()  # nothing left running that could change the world under the audit
            runs += resumes
            finished_ok = [r for r in resumes if r.returncode == 0]
            last = finished_ok[0] if finished_ok else resumes[0]
            recovery = max(r.ended for r in resumes) - min(r.started for r in resumes)
        audit = world.audit(order_id)
        problems += judge(label, audit, reached, last, expect, fail)
        ended = audit.verdict == "cleanly undone" if fail is not None else audit.finished
        return Row(label, reached, audit.counts, audit.duplicates, audit.model_calls, audit.repeated_model_calls,
                   ended and (last is None or last.returncode == 0), recovery, problems, runs, audit.events,
                   audit.verdict if fail is not None else None)
    finally:
        world.stop()


def _resume(agent, world, order_id, count, timeout, extra_env, launcher) -> list[ProcessRun]:
    """Start ``count`` resume processes at once and wait for them all. If one cannot be started or waited
    for, the others are killed and waited for before the error goes on: none is left running."""
    started: list[_Running] = []
    try:
        for _ in range(count):
            started.append(start_agent(agent, world, order_id, extra_env=extra_env, launcher=launcher))
        return [running.finish(timeout) for running in started]
    except BaseException:
        for running in started:
            running.kill()
            with contextlib.suppress(Exception):
                running.finish(0)
        raise


def double_crash_pairs(sample: int | None = 6, fail: str | None = None) -> list[tuple[str, str]]:
    """Pairs (first crash, crash during the resume) that a correct resume always reaches: the second
    point is at a tool that comes after the first point's step, so no durable record can skip it. With
    ``fail``, the tools of the failure path (the do steps up to the failure, then the undo steps); a model
    call is paired only for a do step (code that owns the undo asks the model nothing for it)."""
    if fail is None:
        tools = list(TOOL_ORDER)
    else:
        do, undo = failure_path(check_failure(fail)[0])
        tools = do + undo
    pairs = []
    for i, first_tool in enumerate(tools):
        for later in tools[i + 1:]:
            firsts = [f"before:{first_tool}", f"after:{first_tool}"]
            if first_tool in TOOL_ORDER:
                firsts.insert(0, f"after:model#{i + 1}")
            for first in firsts:
                pairs.append((first, f"after:{later}"))
    if sample is not None and sample < len(pairs):
        step = len(pairs) / sample
        pairs = [pairs[int(k * step)] for k in range(sample)]
    return pairs


def resolve_points(points: str | list[str], fail: str | None = None) -> list[str]:
    """``"all"`` means every point of the order task (with ``fail``, of its failure path); otherwise a list or a
    comma-separated string."""
    if isinstance(points, str):
        every = default_points() if fail is None else failure_points(check_failure(fail)[0])
        points = every if points == "all" else [p.strip() for p in points.split(",") if p.strip()]
    return [check_crash_point(p) for p in points]  # ValueError for a point no run could reach


@dataclass
class Matrix:
    agent: str
    order_id: str
    expect: str
    rows: list[Row]
    seconds: float
    resumers: int = 1
    launcher: str = "warm"
    fail: str | None = None  # TOOL:REASON of the failure path, or None
    not_run: int = 0  # rows left out after the first failing one (``stop_at_first_failure``)

    @property
    def ok(self) -> bool:
        return not self.not_run and all(row.ok for row in self.rows)

    @property
    def expectation(self) -> str:
        return (EXPECTATIONS if self.fail is None else FAILURE_EXPECTATIONS)[self.expect]

    def problems(self) -> list[str]:
        return [problem for row in self.rows for problem in row.problems]

    def row(self, point: str) -> Row:
        return next(r for r in self.rows if r.point == point)

    def as_dict(self) -> dict:
        return {"agent": self.agent, "order_id": self.order_id, "expect": self.expect, "resumers": self.resumers,
                "launcher": self.launcher, **({} if self.fail is None else {"fail": self.fail}),
                "expectation": self.expectation, "ok": self.ok, "seconds": round(self.seconds, 2),
                **({"not_run": self.not_run} if self.not_run else {}), "rows": [row.as_dict() for row in self.rows]}

    def table(self) -> str:
        header = ["crash point", "reached", "duplicates", "model calls", "repeated", "finished", "recovery"]
        if self.fail is not None:
            header[5] = "outcome"
        if self.expect != "observe":
            header.append("verdict")
        lines = []
        for row in self.rows:
            cells = [row.point, "yes" if row.reached else "NO", str(row.duplicates), str(row.model_calls),
                     str(row.repeated_model_calls),
                     (row.verdict or "-") if self.fail is not None else "yes" if row.finished else "NO",
                     "-" if row.recovery_s is None else f"{row.recovery_s:5.2f} s"]
            if self.expect != "observe":
                cells.append("ok" if row.ok else "FAIL")
            lines.append(cells)
        widths = [max(len(str(c)) for c in column) for column in zip(header, *lines)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*cells) for cells in lines]
        return "\n".join(out)

    def __str__(self) -> str:
        title = f"{Path(self.agent).name} on {self.order_id} -- expected: {self.expectation}"
        if self.fail is not None:
            title = f"{Path(self.agent).name} on {self.order_id}, {self.fail} failing for good -- expected: " \
                    f"{self.expectation}"
        if self.resumers > 1:
            title += f"\n({self.resumers} resume processes started at once after each crash)"
        text = f"{title}\n{self.table()}"
        if self.not_run:
            text += f"\n({self.not_run} more crash points not run: the first failing one ended the test)"
        if self.problems():
            text += "\n\n" + "\n".join(f"- {p}" for p in self.problems())
        return text

    __repr__ = __str__

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.as_dict(), indent=2) + "\n")


def crash_test(agent: str | Path, points: str | list[str] = "all", order_id: str = ORDER_ID, *,
               expect: str = "durable", baseline: bool = True, jobs: int = 2, timeout: float = 60.0,
               progress: bool = True, workdir: str | Path | None = None, resumers: int = 1,
               double: list[tuple[str, str]] | None = None, faults: list[tuple] | None = None,
               extra_env: dict | None = None, launcher: "str | WarmLauncher" = "warm",
               preload: tuple[str, ...] = (), fail: str | None = None,
               stop_at_first_failure: bool = False) -> Matrix:
    """Run the crash matrix: one row per crash point (plus a clean baseline run).

    ``double`` adds rows with a second crash during the resume (see :func:`double_crash_pairs`);
    ``resumers`` starts that many resume processes at once; ``faults`` are armed in every row's world;
    ``launcher`` is ``"warm"`` (fork from a warm interpreter, with ``preload`` imported), ``"exec"``, or a
    running :class:`~crashlab.launcher.WarmLauncher` to share between several matrices.

    ``fail`` (``"reserve_item"``, ``"reserve_item:out_of_stock"``, ``"out_of_stock"``) runs the matrix through the
    failure path: that step fails for good for the order in every row, ``"all"`` means the points of the do
    steps up to it and of the undo steps, and each row must end ``cleanly undone`` (see :data:`FAILURE_EXPECTATIONS`).
    """
    agent = Path(agent)
    if not agent.is_file():
        raise FileNotFoundError(f"no agent file at {agent}")
    if expect not in EXPECTATIONS:
        raise ValueError(f"expect must be one of {sorted(EXPECTATIONS)}")
    shared = launcher if isinstance(launcher, WarmLauncher) else None
    if shared is None and launcher not in ("warm", "exec"):
        raise ValueError("launcher must be 'warm', 'exec' or a WarmLauncher")
    if fail is not None:
        fail = "{}:{}".format(*check_failure(fail))  # ValueError, one line, before any world starts
    todo: list[tuple[str, str | None]] = [(BASELINE, None)] if baseline else []
    todo += [(p, None) for p in resolve_points(points, fail)]
    for first, second in double or []:
        resolve_points([first, second])
        todo.append((first, second))
    started = time.time()
    own_dir = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="crashlab-matrix-")) if own_dir else Path(workdir)
    warm = None
    try:  # from here on, the scratch folder is removed however the run ends (a launcher that fails, Ctrl-C)
        workdir.mkdir(parents=True, exist_ok=True)
        if own_dir:
            os.chmod(workdir, 0o711)  # agents (the sandbox user, while grading) reach their own rows, list nothing
        warm = shared or (WarmLauncher(preload) if launcher == "warm" else None)
        rows_running = _Rows()
        failed = threading.Event()

        def one_row(point: str, second: str | None) -> Row | None:
            if stop_at_first_failure and failed.is_set():
                return None  # set by a row that ended in this thread or another: this one is not run
            row = rows_running.run(crash_row, agent, point, order_id, expect=expect, workdir=workdir, timeout=timeout,
                                   resumers=resumers, then_crash_at=second, faults=faults, extra_env=extra_env,
                                   launcher=warm, fail=fail)
            if not row.ok:
                failed.set()
            return row

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(one_row, p, second) for p, second in todo]
            try:
                done = as_completed(futures)
                if progress:
                    from tqdm.auto import tqdm  # a widget in a notebook (not text on the red stderr), else stderr

                    done = tqdm(done, total=len(futures), desc=f"crash matrix: {agent.name}", unit="point",
                                dynamic_ncols=True)
                for future in done:
                    future.result()
                rows = [row for row in (f.result() for f in futures) if row is not None]
            except BaseException:
                for future in futures:  # rows not started yet never start; those running end now, their agents killed
                    future.cancel()
                rows_running.stop()
                raise
    finally:
        if warm is not None and shared is None:
            warm.close()
        if own_dir:
            remove_scratch(workdir)
    return Matrix(str(agent), order_id, expect, rows, time.time() - started, resumers=resumers,
                  launcher="warm" if shared else launcher, fail=fail, not_run=len(todo) - len(rows))


__all__ = ["crash_test", "crash_row", "run_agent", "run_python", "start_agent", "double_crash_pairs", "Matrix", "Row",
           "ProcessRun", "EXPECTATIONS", "FAILURE_EXPECTATIONS", "BASELINE"]
