"""The per-step measurement, run inside a row's own child process: a warm-up, then N-step runs against 1-step
ones (:func:`measure`)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from crashlab.bench.common import workloads_for
from crashlab.engines.workload import Workload


def workload_for(variant: str, workdir: Path, recovery: bool = False) -> Workload:
    return workloads_for(variant).make(variant, workdir, recovery)


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


__all__ = ["measure", "workload_for"]
