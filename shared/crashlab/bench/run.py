"""The benchmark run, :func:`run_benchmark`: the floor first, then each engine measured and its recovery
scene played in child processes, the floor measured again, every failure turned into a row's note, and the
ratios to this run's floor (and each framework integration's to its engine's own row, measured beside it); with
its helpers for the result's ``versions``, the work directory's filesystem
type, and the note that explains each engine's row (``_versions``, ``_filesystem``, ``_note_for``)."""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from crashlab.bench.common import FLOOR, BenchError, engine_rows, joined, workloads_for
from crashlab.bench.lengths import RESULT_BYTES, LongRow, long_variants, measure_lengths
from crashlab.bench.results import BenchResult, BenchRow
from crashlab.bench.spawn import Servers, availability, measure_engine, recover_engine
from crashlab.engines import registry
from crashlab.engines.registry import integration_of_variant
from crashlab.plumbing.progress import keep_ticking
from crashlab.plumbing.scratch import make_scratch, remove_scratch


def _versions() -> dict[str, str]:
    """The installed versions of every engine's packages and server (each entry says what it has)."""
    return {dist: found for entry in registry.ENGINES.values() for dist, found in entry.versions().items()}


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
    workload = workloads_for(engine)
    notes = list(workload.note(engine))
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
        notes += workload.recovery_note(engine)
    return "; ".join(notes)


def run_benchmark(steps: int = 50, repeats: int = 3, engines: Sequence[str] | None = None,
                  workdir: str | os.PathLike | None = None, progress: bool = True, recovery: bool = True,
                  timeout_s: float = 180.0, lengths: Sequence[int] | None = None,
                  result_bytes: int = RESULT_BYTES, per_step: bool = True) -> BenchResult:
    """Measure every engine in ``engines`` (default: :func:`~crashlab.bench.common.engine_rows`, the engines' own
    rows; a framework integration is measured when named, with its engine's own row
    put before it if not named too) and return the table.

    ``steps`` per workflow (at least 2), median of ``repeats``; ``recovery`` adds the SIGKILL scene per
    engine. Each measurement is a new process with ``timeout_s``; servers started here are stopped before
    returning. ``lengths`` (turns, each at least 2) adds the length axis (:mod:`crashlab.bench.lengths`): each engine's
    long agent, on the row its registry entry names, measured at each length with ``result_bytes`` per turn;
    ``per_step=False`` leaves out the per-step measurement (and so the recovery scene): the length axis alone.
    Files go to a new ``run-*`` directory under ``workdir`` (kept: databases, each child's log
    and raw JSON) or to a temporary directory (deleted). Never raises for an engine that cannot run: its
    row says why.
    """
    if steps < 2:
        raise ValueError("steps must be at least 2 (the per-step cost is the difference to a 1-step run)")
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    lengths = sorted(set(lengths or ()))
    if any(n < 2 for n in lengths):
        raise ValueError(f"every length is at least 2 turns (a growth needs two), got {lengths}")
    engines = _with_pairs(list(dict.fromkeys(engines)) if engines is not None else list(engine_rows()))
    long_rows: list[LongRow] = []
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    temporary = workdir is None
    base = Path(workdir).resolve() if workdir is not None else make_scratch("crashlab-bench-")
    base.mkdir(parents=True, exist_ok=True)
    run_dir = base if temporary else Path(tempfile.mkdtemp(prefix="run-", dir=base))
    kill_at = steps // 2 + 1
    rows: list[BenchRow] = []
    bar = None
    if progress:
        with contextlib.suppress(ImportError):
            from tqdm.auto import tqdm  # a widget in a notebook, text on stderr in a terminal

            bar = tqdm(total=len(engines) * (per_step + recovery) + 1 + len(long_variants(engines)) * len(lengths),
                       desc="bench", unit="task", leave=False)

    def tick(text: str) -> None:
        if bar is not None:
            bar.set_postfix_str(text, refresh=False)
            bar.update(1)

    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(keep_ticking(bar))  # an engine's recovery scene takes seconds: the clock runs on
            servers = Servers(run_dir, stack, timeout_s)
            for engine in engines:
                row = BenchRow(engine)
                rows.append(row)
                why = availability(engine)
                if why:
                    row.note = why
                    if per_step:
                        tick(engine)
                    if recovery:
                        tick(engine)
                    if lengths and long_variants([engine]):
                        long_rows.append(LongRow(engine, note=why))
                        for n in lengths:
                            tick(f"{engine} at {n} turns")
                    continue
                if per_step:
                    try:
                        row.samples_ms = [round(s, 4) for s in
                                          measure_engine(engine, servers, run_dir, steps, repeats, timeout_s)]
                        row.per_step_ms = statistics.median(row.samples_ms)
                        if row.per_step_ms <= 0:  # (t(N) - t(1)) / (N - 1) lost in one invocation's jitter
                            row.note = _below_noise(steps)
                            if engine != FLOOR:  # no figure rather than a negative one (the floor is measured again)
                                row.per_step_ms = None
                    except Exception as exc:  # noqa: BLE001 -- every failure becomes a row, never a traceback
                        row.note = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
                    tick(f"{engine} measured")
                if recovery and engine != FLOOR and (row.ok or row.samples_ms):  # it ran, its figure in the noise
                    try:
                        got = recover_engine(engine, servers, run_dir, steps, timeout_s)
                        row.recovery_s = round(got["recovery_s"], 3)
                        row.recovery_startup_s = round(got["recovery_startup_s"], 3)
                        row.recovery_steps_run = got["steps_run"]
                        row.note = joined(row.note, _note_for(engine, got["steps_run"], steps, kill_at))
                    except Exception as exc:  # noqa: BLE001
                        msg = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
                        row.note = joined(row.note, f"recovery not measured: {msg}")
                elif row.ok:
                    row.note = joined(row.note, _note_for(engine, None, steps, kill_at))
                if recovery:
                    tick(f"{engine} recovered")
                if lengths and long_variants([engine]):
                    long_rows.append(measure_lengths(engine, servers, run_dir, lengths, result_bytes, timeout_s, tick))
            # The disk is shared with whatever else the machine does: measure the floor again after the
            # engines, and keep the median of both, so that the ratios do not hang on one moment.
            floor_row = rows[engines.index(FLOOR)]
            if floor_row.ok and len(engines) > 1:
                with contextlib.suppress(Exception):
                    again = measure_engine(FLOOR, servers, run_dir, steps, repeats, timeout_s, tag="-after")
                    floor_row.samples_ms += [round(x, 4) for x in again]
                    floor_row.per_step_ms = statistics.median(floor_row.samples_ms)
                    floor_row.note = ("measured before and after the engines" if floor_row.per_step_ms > 0 else
                                      _below_noise(steps))
            tick("floor again")
    finally:
        if bar is not None:
            bar.close()
        if temporary:
            remove_scratch(base)
    floor = next((r.per_step_ms for r in rows if r.engine == FLOOR), None)
    for r in rows:
        # a floor lost in the noise (zero or below) is no unit to divide by: no ratios rather than absurd ones
        if r.per_step_ms is not None and floor is not None and floor > 0:
            r.ratio_to_floor = r.per_step_ms / floor
    _note_pairs(rows)
    machine = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
               "workdir_fs": _filesystem(run_dir if not temporary else Path(tempfile.gettempdir()))}
    return BenchResult(steps=steps, repeats=repeats, engines=engines, rows=rows, recovery=recovery,
                       recovery_steps=steps, recovery_kill_at=kill_at, machine=machine, versions=_versions(),
                       started=started, elapsed_s=time.monotonic() - t0, lengths=lengths, long_rows=long_rows,
                       result_bytes=result_bytes)


def run_long_agents(lengths: Sequence[int], steps: int = 20, timeout_s: float = 180.0, progress: bool = True,
                    workdir: str | os.PathLike | None = None, beside: BenchResult | None = None) -> BenchResult:
    """One long-agent row per engine (each registry entry's ``long_bench`` row) at ``lengths``, beside that row's
    per-step cost (``steps`` per workflow, one run) and no other recovery scene: what the demo and the side-by-side
    lesson show. ``beside``: a run made already on this machine, whose per-step rows are taken instead of measuring
    them again (the side-by-side lesson's, a few cells up)."""
    result = run_benchmark(steps=steps, repeats=1, engines=[entry.long_bench for entry in registry.ENGINES.values()],
                           workdir=workdir, progress=progress, recovery=False, timeout_s=timeout_s, lengths=lengths,
                           per_step=beside is None)
    if beside is not None:
        measured = {r.engine: r for r in beside.rows}
        result.rows = [measured.get(r.engine, r) for r in result.rows]
    return result


def _with_pairs(engines: list[str]) -> list[str]:
    """The rows to measure: the floor first (every ratio needs the floor of this very run), and each framework
    integration right after its engine's own row (put there if the caller did not name it)."""
    out = [] if FLOOR in engines else [FLOOR]
    for variant in engines:
        integration = integration_of_variant(variant)
        if integration is not None and integration.beside not in engines and integration.beside not in out:
            out.append(integration.beside)
        out.append(variant)
    return out


def _note_pairs(rows: list[BenchRow]) -> None:
    """Say on each integration's row what it costs against its engine's own row of the same run."""
    measured = {r.engine: r.per_step_ms for r in rows if r.ok}
    for r in rows:
        integration = integration_of_variant(r.engine)
        if integration is None:
            continue
        bare = measured.get(integration.beside)
        if r.ok and bare and bare > 0 and r.per_step_ms is not None and r.per_step_ms > 0:
            pair = f"{integration.title}: {r.per_step_ms / bare:.1f} x {integration.beside}'s per step"
        else:
            pair = f"{integration.title}, beside {integration.beside} (not both measured)"
        r.note = joined(pair, r.note)


def _below_noise(steps: int) -> str:
    """The note of a row whose median per-step figure is zero or below: (t(N) - t(1)) / (N - 1) was lost in one
    invocation's jitter, the floor's included."""
    return f"below this run's noise at {steps} steps; measure with more steps"
