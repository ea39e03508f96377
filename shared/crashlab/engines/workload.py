"""An engine's benchmark workload: what :mod:`crashlab.bench` runs in a row's own child process to measure what a
durable step costs and how a killed run recovers. Each engine's registry entry has a :class:`Workloads` (its
rows' kind of workload, and each framework integration on it one of its own); :meth:`Workloads.make` gives the
:class:`Workload` that runs in the child. Every row does the same trivial step (:func:`step_body`), which
counts itself and, in the process about to be killed, stops dead at the chosen step (:func:`reached_block_point`).
"""

from __future__ import annotations

import importlib.util
import os
import time
from abc import ABC, abstractmethod
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from crashlab.engines.record import Entry, Record
from crashlab.errors import CrashlabError

ENV_BLOCK_AT = "CRASHLAB_BENCH_BLOCK_AT"   # the step (1-based) at which to block, in the killed process only
ENV_MARKER = "CRASHLAB_BENCH_MARKER"       # the file to create when that step is reached

_executed = 0  # steps run in this process (the recovery scene reports it)
T = TypeVar("T")


class BenchError(CrashlabError, RuntimeError):
    """One engine's measurement could not be made; the message becomes that row's note."""


def reached_block_point(i: int) -> bool:
    """Whether step ``i`` (0-based) is where this process is to stop dead and wait for its SIGKILL: only in
    the process the recovery scene kills, told so through its environment (never through the workflow's
    arguments, which the recovering process replays). Leaves the marker the parent waits for first."""
    block_at = os.environ.get(ENV_BLOCK_AT)
    if not block_at or i + 1 != int(block_at):
        return False
    marker = os.environ.get(ENV_MARKER)
    if marker:
        Path(marker).write_text(f"{os.getpid()} {time.time()}\n")
    return True


def step_body(i: int) -> int:
    """What every engine's step does (Temporal's activity too, in :mod:`crashlab.engines.temporal.bench_workflow`):
    count itself, and, in the process that is about to be killed, stop dead at the chosen step."""
    global _executed
    _executed += 1
    while reached_block_point(i):  # wait for the SIGKILL
        time.sleep(3600)
    return i + 1


def long_step(i: int, conversation: list[str], result_bytes: int) -> str:
    """A turn of the benchmark's long agent: the step of every engine (:func:`step_body`: it counts itself and may stop
    dead), handed the conversation so far as an agent's model call is, returning a result of ``result_bytes`` bytes
    that the workflow appends to it. Where an engine records a step's input, it records the whole conversation."""
    step_body(i)
    head = f"turn {i + 1}, after {len(conversation)} results: "
    return head + "x" * max(0, result_bytes - len(head))


class Workload:
    """One engine, set up in this process: ``run(n)`` runs a fresh n-step workflow to its end.

    The benchmark's length axis runs the engine's long agent instead (on the row its registry entry names
    ``long_bench``): with ``result_bytes`` set, ``start_recoverable`` and ``resume`` run n turns of :func:`long_step`,
    and ``record(wid)`` reads what the engine stored for them, ``ends_turn`` naming the entry that ends a turn."""

    result_bytes = 0  # the long agent's result size per turn; 0: the trivial steps

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

    def record(self, wid: str) -> Record:
        """What the engine stored for the long agent's workflow ``wid``, read by its own record reader."""
        raise BenchError(f"{type(self).__name__} runs no long agent")

    def ends_turn(self, entry: Entry) -> bool:
        """Whether ``entry`` of :meth:`record` is the one that ends a turn."""
        raise BenchError(f"{type(self).__name__} runs no long agent")

    def close(self) -> None:
        pass


class SharedServers(Protocol):
    """What a workload may start for its rows, once per benchmark run (:class:`crashlab.bench.spawn.Servers`)."""

    workdir: Path
    stack: ExitStack

    def shared(self, name: str, start: Callable[[], T]) -> T: ...


class Workloads(ABC):
    """How one engine's benchmark rows (its variants: ``dbos-sqlite``, ``dbos-postgres``) are run. ``preload``: what
    a row's child imports before its clock starts, besides the registry's imports; ``env``: the variables
    :meth:`servers_env` hands the child (a child never inherits them from the benchmark's own environment)."""

    preload: tuple[str, ...] = ()
    env: tuple[str, ...] = ()

    @abstractmethod
    def unavailable(self, variant: str) -> str | None:
        """Why the row cannot be measured here (a package or a binary missing), or None; asked in the caller's
        process, before any child starts."""

    @abstractmethod
    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        """The row's workload, set up in its child process (``recovery``: for the recovery scene)."""

    def note(self, variant: str) -> list[str]:
        """What the row's per-step figure means, where it needs saying."""
        return []

    def recovery_note(self, variant: str) -> list[str]:
        """What the row's recovery figure means, where it needs saying."""
        return []

    def servers_env(self, variant: str, servers: SharedServers) -> dict[str, str]:
        """What the row's child needs besides the engine's own server (a fresh database on a shared PostgreSQL)."""
        return {}


def missing(*modules: str) -> str | None:
    """Why an engine's row cannot run here (a module not installed), or None."""
    for module in modules:
        try:
            if importlib.util.find_spec(module) is None:
                return f"the Python package providing {module} is not installed"
        except (ImportError, ValueError):
            return f"the Python package providing {module} is not installed"
    return None


__all__ = ["BenchError", "ENV_BLOCK_AT", "ENV_MARKER", "SharedServers", "Workload", "Workloads", "long_step",
           "missing", "reached_block_point", "step_body"]
