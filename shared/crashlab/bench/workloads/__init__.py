"""The engines' workloads, run inside each engine's own child process: one module per engine (and the fsync
floor, and one per framework integration, which reuses its engine's), each with the same four names -- ``make`` (its :class:`~.base.Workload` for a benchmark row),
``unavailable`` (why the row cannot run here, or None), ``note`` and ``recovery_note`` (what the row's figures
mean) -- chosen by the
engine registry; and :func:`measure`, the per-step measurement: a warm-up, then N-step runs against 1-step ones."""

from __future__ import annotations

import importlib
import statistics
import time
from pathlib import Path
from types import ModuleType

from crashlab.bench.workloads.base import Workload, step_body
from crashlab.engines.registry import engine_of_variant, integration_of_variant


def module_for(variant: str) -> ModuleType:
    """The workload module of a benchmark row (``dbos-postgres`` -> :mod:`.dbos`; an integration's own,
    ``dbos+pydantic-ai`` -> :mod:`.dbos_pydantic_ai`; the floor's own)."""
    entry, integration = engine_of_variant(variant), integration_of_variant(variant)
    return importlib.import_module(integration.workload if integration else
                                   entry.workload if entry else "crashlab.bench.workloads.floor")


def workload_for(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return module_for(variant).make(variant, workdir, recovery)


def measure(variant: str, workdir: Path, steps: int, repeats: int) -> dict:
    """The per-step measurement, run inside the engine's own process."""
    workload = workload_for(variant, workdir)
    try:
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
        return {"engine": variant, "samples_ms": samples, "one_s": one, "full_s": full}
    finally:
        workload.close()


__all__ = ["Workload", "measure", "module_for", "step_body", "workload_for"]
