"""The floor: append one JSON line and fsync it per step -- what any durable step costs at least."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crashlab.engines.workload import Workload, Workloads


class Floor(Workload):
    def __init__(self, workdir: Path):
        self.path = workdir / "floor.jsonl"

    def run(self, n: int) -> None:
        with open(self.path, "a") as f:
            for i in range(n):
                f.write(json.dumps({"step": i, "result": i + 1}) + "\n")
                f.flush()
                os.fsync(f.fileno())


class FloorWorkloads(Workloads):
    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        return Floor(workdir)

    def unavailable(self, variant: str) -> str | None:
        return None


__all__ = ["Floor", "FloorWorkloads"]
