"""What every engine's workload shares: the trivial step they all run (:func:`step_body`, which counts itself and,
in the process about to be killed, blocks at the chosen step) and the :class:`Workload` interface the benchmark's
child process drives."""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from crashlab.bench.common import reached_block_point

_executed = 0  # steps run in this process (the recovery scene reports it)


def step_body(i: int) -> int:
    """What every engine's step does (Temporal's activity too, in :mod:`crashlab.bench.temporal_workflow`): count
    itself, and, in the process that is about to be killed, stop dead at the chosen step."""
    global _executed
    _executed += 1
    while reached_block_point(i):  # wait for the SIGKILL
        time.sleep(3600)
    return i + 1


class Workload:
    """One engine, set up in this process: ``run(n)`` runs a fresh n-step workflow to its end."""

    def launch(self) -> None:
        """Start the engine's own machinery, where it has any (DBOS's launch, which also recovers)."""

    def run(self, n: int) -> None:
        raise NotImplementedError

    def start_recoverable(self, n: int, wid: str) -> None:
        """Run an n-step workflow under a fixed id (the recovery scene's first process, which dies in it)."""
        raise NotImplementedError

    def resume(self, n: int, wid: str) -> Any:
        """Finish the workflow ``wid`` that a killed process left behind; return its result."""
        raise NotImplementedError

    @property
    def executed(self) -> int:
        """How many steps ran in this process."""
        return _executed

    def close(self) -> None:
        pass


def missing(*modules: str) -> str | None:
    """Why an engine's row cannot run here (a module not installed), or None."""
    for module in modules:
        try:
            if importlib.util.find_spec(module) is None:
                return f"the Python package providing {module} is not installed"
        except (ImportError, ValueError):
            return f"the Python package providing {module} is not installed"
    return None


__all__ = ["Workload", "missing", "step_body"]
