"""The crash matrix: one row per crash point -- a fresh world, a real SIGKILL at the point, a resume in a new
process, a verdict from the audit -- run a few rows at a time, plus the double crashes and racing resumers.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crashlab.plumbing import sandbox as sandboxes
from crashlab.course.metadata import Expect, LauncherKind
from crashlab.harness.options import Fault, MatrixKeywords, MatrixOptions
from crashlab.harness.runs import CrashTestAgents, ProcessRun, RowsStopped, RunningAgent, run_agent, start_agent
from crashlab.harness.verdicts import EXPECTATIONS, FAILURE_EXPECTATIONS, Row, judge, judge_screen
from crashlab.harness.launcher import WarmLauncher, kept_launcher
from crashlab.crash_points import BASELINE, check_on_path, default_points, failure_points, row_label, row_label_lines
from crashlab.order import ORDER_ID, check_failure
from crashlab.plumbing.lines import fit
from crashlab.plumbing.outputs import MATRIX, write_output
from crashlab.plumbing.progress import keep_ticking
from crashlab.plumbing.scratch import make_scratch, remove_scratch
from crashlab.world import World
from crashlab.world.stream import MATRIX_PACE

if TYPE_CHECKING:
    from typing_extensions import Unpack

# Resume processes started at once after a crash (crash-test --resumers, soak --resumers A..B): a race needs two or
# three; hundreds only measure the machine, and take many seconds to stop when the command is interrupted.
MAX_RESUMERS = 32


def _check_key_lifetime(key_lifetime: float | None) -> None:
    """ValueError in one line, before any world starts, for a key lifetime a row cannot wait out."""
    if key_lifetime is not None and not 0 < key_lifetime < 600:
        raise ValueError(f"key_lifetime must be between 0 and 600 seconds, got {key_lifetime!r}")


def crash_row(agent: str | Path, point: str, order_id: str = ORDER_ID, *, expect: Expect = "durable",
              workdir: Path | None = None, timeout: float = 60.0, keep: bool = False, resumers: int = 1,
              then_crash_at: str | None = None, faults: list[Fault] | None = None, extra_env: dict | None = None,
              launcher: WarmLauncher | LauncherKind | None = "warm", fail: str | None = None,
              key_lifetime: float | None = None, result_bytes: int = 0) -> Row:
    """One row of the matrix: a fresh world, a crash at ``point`` (or none for the baseline), a resume.

    - ``resumers``: how many resume processes start at once after the crash (they race);
    - ``then_crash_at``: a second crash point for the first resume (a double crash), then a clean resume;
    - ``faults``: ``(name, times, arg)`` faults armed in the world first, e.g. ``("lost_ack:charge_card", 1, None)``;
    - ``launcher``: ``"warm"`` (the default: forked from this process's kept launcher, as ``crash_test``'s are,
      which spares each of the row's two or more processes the SDK's import), a running
      :class:`~crashlab.harness.launcher.WarmLauncher`, or None (or ``"exec"``) for a new interpreter per process;
    - ``fail``: ``TOOL`` or ``TOOL:REASON``, a step told to fail for good for the order before the first run
      (the failure path: the order must end cleanly undone);
    - ``key_lifetime``: the row's world forgets a completed idempotency key that many seconds after its first
      use (as payment providers do after about a day), and the resume starts only once the crashed run's keys
      are forgotten: an agent that relies on its keys alone charges again;
    - ``result_bytes``: the row's world answers a backlog order's tool calls with a receipt of that many characters
      (``World.start(result_bytes=)``), for a long agent whose conversation must grow.
    """
    _check_key_lifetime(key_lifetime)
    if workdir is not None:  # a lesson's folder that no earlier cell made (its demonstrations skipped) is no error
        Path(workdir).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="row-", dir=workdir))
    try:
        with sandboxes.crash_user(home=base):  # while grading: the row's processes, all killed after each crash
            return _crash_row(agent, point, base, order_id, expect, timeout, resumers, then_crash_at, faults,
                              extra_env, launcher, fail, key_lifetime, result_bytes)
    finally:
        if not keep:
            remove_scratch(base)


def _crash_row(agent, point, base, order_id, expect, timeout, resumers, then_crash_at, faults, extra_env,
               launcher, fail=None, key_lifetime=None, result_bytes=0) -> Row:
    failing = check_failure(fail) if fail is not None else None  # before any world starts
    sandboxes.give(base)
    if launcher == "warm":
        launcher = kept_launcher()  # once: the row's world and every one of its runs fork from it
    world = World.start(base / "world", key_lifetime=key_lifetime, result_bytes=result_bytes,
                        launcher=launcher if isinstance(launcher, WarmLauncher) else None)
    label = row_label(point, then_crash_at)
    try:
        world.streaming(pace=MATRIX_PACE)  # nobody watches a row: a streaming agent's replies come at once
        if failing is not None:
            world.fail_permanently(order_id, *failing)
        for name, times, arg in faults or []:
            world.inject(name, times, arg, order_id=order_id)  # the order's own: a decoy's requests leave them
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
                if run.crash_note:
                    why = run.crash_note
                elif run.timed_out:
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
            if key_lifetime is not None and runs:
                time.sleep(max(0.0, runs[-1].ended + key_lifetime + 0.2 - time.time()))  # the crashed run's keys expire
            resumes = _resume(agent, world, order_id, count, timeout, extra_env, launcher)
            sandboxes.kill_crashed()  # nothing left running that could change the world under the audit
            runs += resumes
            finished_ok = [r for r in resumes if r.returncode == 0]
            last = finished_ok[0] if finished_ok else resumes[0]
            recovery = max(r.ended for r in resumes) - min(r.started for r in resumes)
        audit = world.audit(order_id)
        problems += judge(label, audit, reached, last, expect, fail)
        screen = world.screen_audit(order_id)  # what the user saw, for an agent that shows anything
        if reached and screen.shows and expect != "observe":
            problems += judge_screen(label, screen)
        ended = audit.verdict == "cleanly undone" if fail is not None else audit.finished
        return Row(label, reached, audit.counts, audit.duplicates, audit.model_calls, audit.repeated_model_calls,
                   ended and (last is None or last.returncode == 0), recovery, problems, runs, audit.events,
                   audit.verdict if fail is not None else None, screen if reached and screen.shows else None)
    finally:
        world.stop()


def _resume(agent, world, order_id, count, timeout, extra_env, launcher) -> list[ProcessRun]:
    """Start ``count`` resume processes at once and wait for them all. If one cannot be started or waited
    for, the others are killed and waited for before the error goes on: none is left running."""
    started: list[RunningAgent] = []
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


def resolve_points(points: str | list[str], fail: str | None = None) -> list[str]:
    """``"all"`` means every point of the order task (with ``fail``, of its failure path); otherwise a list or a
    comma-separated string, each a point of that path (a ValueError, one line, for one no run could reach)."""
    failing = None if fail is None else check_failure(fail)[0]
    if isinstance(points, str):
        every = default_points() if failing is None else failure_points(failing)
        points = every if points == "all" else [p.strip() for p in points.split(",") if p.strip()]
    return [check_on_path(p, failing) for p in points]


# The first column's width in a crash table: the longest crash point of the order task
# (``before:send_confirmation``) and a little more. A longer label -- a double crash's ``A + B`` -- takes two lines.
POINT_WIDTH = 26


@dataclass
class Matrix:
    agent: str
    order_id: str
    expect: Expect
    rows: list[Row]
    seconds: float
    resumers: int = 1
    launcher: LauncherKind = "warm"
    fail: str | None = None  # TOOL:REASON of the failure path, or None
    not_run: int = 0  # rows left out after the first failing one (``stop_at_first_failure``)
    key_lifetime: float | None = None  # seconds a key lived in each row's world; resumes came after (None: forever)
    past_deadline: bool = False  # the caller's deadline stopped the matrix: the rows it left are in not_run

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
                **({"not_run": self.not_run} if self.not_run else {}),
                **({} if self.key_lifetime is None else {"key_lifetime": self.key_lifetime}),
                "rows": [row.as_dict() for row in self.rows]}

    def table(self) -> str:
        """One line per row under a header: ``dups`` are duplicate effects, ``calls`` model calls, ``repeats``
        model calls repeated after their answer was recorded. No line is wider than
        :data:`~crashlab.plumbing.lines.LINE_WIDTH` for the order's crash points: a double crash's label too long
        for the first column (``A + B``) takes two lines, ``A +`` alone and then ``  B`` with the row's cells."""
        header = ["crash point", "reached", "dups", "calls", "repeats", "finished", "recovery"]
        if self.fail is not None:
            header[5] = "outcome"
        if self.expect != "observe":
            header.append("verdict")
        lines: list[list[str]] = []
        for row in self.rows:
            cells = ["yes" if row.reached else "NO", str(row.duplicates), str(row.model_calls),
                     str(row.repeated_model_calls), self._outcome(row) if self.fail is not None
                     else "yes" if row.finished else "NO",
                     "-" if row.recovery_s is None else f"{row.recovery_s:5.2f} s"]
            if self.expect != "observe":
                cells.append("ok" if row.ok else "FAIL")
            *first, last = row_label_lines(row.point, POINT_WIDTH)
            lines += [[part] + [""] * len(cells) for part in first]
            lines.append([last, *cells])
        widths = [max(len(c) for c in column) for column in zip(header, *lines)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
        out += [fmt.format(*cells) for cells in lines]
        return "\n".join(line.rstrip() for line in out)

    def _outcome(self, row: Row) -> str:
        """The failure path's outcome as a reader takes it in beside the verdict: the audit nets a refund sent twice
        to zero and calls that "cleanly undone", which must not stand next to FAIL as if it were clean."""
        verdict = row.verdict or "-"
        if verdict == "cleanly undone" and row.duplicates:
            return f"undone, {row.duplicates} dup{'s' if row.duplicates != 1 else ''}"  # as the dups column
        return verdict

    def __str__(self) -> str:
        title = f"{Path(self.agent).name} on {self.order_id}"
        if self.fail is not None:
            title += f", {self.fail} failing for good"
        title += f"\nexpected: {self.expectation}"
        if self.resumers > 1:
            title += f"\n({self.resumers} resume processes started at once after each crash)"
        if self.key_lifetime is not None:
            title += f"\n(idempotency keys forgotten {self.key_lifetime:g} s after first use; each resume came later)"
        text = f"{fit(title)}\n{self.table()}"
        if self.not_run:
            text += f"\n({self.not_run} more crash points not run: the first failing one ended the test)"
        if self.problems():
            text += "\n\n" + fit("\n".join(f"- {p}" for p in self.problems()))
        return text

    __repr__ = __str__

    def write_json(self, path: str | Path, *, force: bool = False) -> None:
        """Atomically; an existing file other than a matrix is refused (:mod:`crashlab.plumbing.outputs`) unless ``force``."""
        write_output(path, json.dumps(self.as_dict(), indent=2) + "\n", MATRIX, force=force)


def crash_test(agent: str | Path, options: MatrixOptions | str | list[str] = "all", order_id: str = ORDER_ID, *,
               baseline: bool = True, progress: bool = True, workdir: str | Path | None = None,
               extra_env: dict[str, str] | None = None, key_lifetime: float | None = None, result_bytes: int = 0,
               stop_at_first_failure: bool = False, deadline: float | None = None,
               stop: threading.Event | None = None, **matrix: Unpack[MatrixKeywords]) -> Matrix:
    """Run the crash matrix ``options`` on ``agent``: one row per crash point (plus a clean baseline run).

    ``options`` is a :class:`~crashlab.harness.options.MatrixOptions` (``MatrixOptions.from_spec`` reads one from a
    lesson's metadata); or, the keyword form lessons write, its points, with the rest of its fields as keywords
    (``crash_test("agent.py", "all", expect="durable", launcher=launcher)``). Keywords given with a
    ``MatrixOptions`` replace its fields.

    ``double`` adds rows with a second crash during the resume (see :func:`double_crash_pairs`);
    ``resumers`` starts that many resume processes at once; ``faults`` are armed in every row's world;
    ``launcher`` is ``"warm"`` (fork from a warm interpreter, with ``preload`` imported: the process keeps one per
    preload for its later crash tests, :func:`~crashlab.harness.launcher.kept_launcher`), ``"exec"``, or a running
    :class:`~crashlab.harness.launcher.WarmLauncher` to share between several matrices.

    ``fail`` (``"reserve_item"``, ``"reserve_item:out_of_stock"``, ``"out_of_stock"``) runs the matrix through the
    failure path: that step fails for good for the order in every row, ``"all"`` means the points of the do
    steps up to it and of the undo steps, and each row must end ``cleanly undone`` (see :data:`FAILURE_EXPECTATIONS`).

    ``order_id`` may be a backlog's (``ORD-BL-008``, the long task: :mod:`crashlab.backlog`); its points are then
    numbered ones (``after:turn#9``, ``before:charge_card#4``, :func:`~crashlab.crash_points.boundary_points`), and
    ``result_bytes`` gives its orders' tool replies a receipt of that many characters in every row's world.

    ``deadline`` (a ``time.monotonic()`` value): when it passes, the rows still running are stopped (their agents
    killed) and no other row starts; the matrix comes back with ``past_deadline`` set and those rows in
    ``not_run``. A grader's deadline then bounds a whole matrix, not only each of its runs. ``stop``, set from
    another thread, does the same at once: a Ctrl-C raised in the thread that started this matrix in a worker (the
    demo's) reaches no row of it, and would otherwise wait for the whole matrix to end.
    """
    options = (options if isinstance(options, MatrixOptions) else MatrixOptions(points=options)).but(**matrix)
    expect, launcher, fail, preload = options.expect, options.launcher, options.fail, options.preload
    resumers, timeout, faults = options.resumers, options.timeout, options.faults
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
    _check_key_lifetime(key_lifetime)
    todo: list[tuple[str, str | None]] = [(BASELINE, None)] if baseline else []
    todo += [(p, None) for p in resolve_points(options.points, fail)]
    for first, second in options.double or []:
        resolve_points([first, second], fail)
        todo.append((first, second))
    started = time.time()
    own_dir = workdir is None
    workdir = Path(workdir) if workdir is not None else make_scratch("crashlab-matrix-")
    warm = None
    try:  # from here on, the scratch folder is removed however the run ends (a launcher that fails, Ctrl-C)
        workdir.mkdir(parents=True, exist_ok=True)
        if own_dir:
            os.chmod(workdir, 0o711)  # agents (the sandbox user, while grading) reach their own rows, list nothing
        warm = shared or (kept_launcher(preload) if launcher == "warm" else None)  # kept for later crash tests
        rows_running = CrashTestAgents()
        failed, late = threading.Event(), threading.Event()
        if deadline is not None:
            def stop_late() -> None:
                late.set()
                rows_running.stop()

            watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), stop_late)
            watchdog.daemon = True
            watchdog.start()
        finished = threading.Event()
        if stop is not None:
            def watch_stop() -> None:
                while not finished.wait(0.2):
                    if stop.is_set():
                        late.set()
                        rows_running.stop()
                        return

            threading.Thread(target=watch_stop, daemon=True).start()

        def one_row(point: str, second: str | None) -> Row | None:
            if late.is_set() or (stop_at_first_failure and failed.is_set()):
                return None  # set by a row that ended in this thread or another: this one is not run
            try:
                row = rows_running.run(crash_row, agent, point, order_id, expect=expect, workdir=workdir,
                                       timeout=timeout, resumers=resumers, then_crash_at=second, faults=faults,
                                       extra_env=extra_env, launcher=warm, fail=fail, key_lifetime=key_lifetime,
                                       result_bytes=result_bytes)
            except RowsStopped:
                if late.is_set():
                    return None
                raise
            if late.is_set():
                return None  # its agents were killed by the deadline: what it saw says nothing of the agent
            if not row.ok:
                failed.set()
            return row

        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            futures = [pool.submit(one_row, p, second) for p, second in todo]
            try:
                done = as_completed(futures)
                bar = None
                if progress:
                    from tqdm.auto import tqdm  # a widget in a notebook (not text on the red stderr), else stderr

                    done = bar = tqdm(done, total=len(futures), desc=f"crash matrix: {agent.name}", unit="point",
                                      dynamic_ncols=True)
                with keep_ticking(bar):  # a row can take many seconds: the bar's clock runs on meanwhile
                    for future in done:
                        future.result()
                rows = [row for row in (f.result() for f in futures) if row is not None]
            except BaseException:
                for future in futures:  # rows not started yet never start; those running end now, their agents killed
                    future.cancel()
                rows_running.stop()
                raise
            finally:
                finished.set()
                if deadline is not None:
                    watchdog.cancel()
    finally:
        if own_dir:
            remove_scratch(workdir)
    return Matrix(str(agent), order_id, expect, rows, time.time() - started, resumers=resumers,
                  launcher="warm" if shared or launcher != "exec" else "exec", fail=fail, not_run=len(todo) - len(rows),
                  key_lifetime=key_lifetime, past_deadline=late.is_set())
