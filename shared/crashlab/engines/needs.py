"""Servers a crash matrix needs besides the world, named in a lesson's metadata (``"needs": "temporal"``), by the
engine registry's names.

The grader, the demo and the soak (``crashlab soak --needs temporal``) start each once, pass its address to the
agents through the environment, and stop it at the end. :func:`needs_of` reads what a spec or a command names, in
the one way everyone reads it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterable, Mapping

from crashlab.engines.registry import engine, with_server


def needs_of(named: Mapping[str, Any] | str | Iterable[str] | None) -> tuple[str, ...]:
    """The servers named -- a lesson's spec (its ``needs``: one name or a list), a name, or names -- once each, in
    order; a one-line ValueError for a name that is not an engine with a server."""
    needs = named.get("needs") if isinstance(named, Mapping) else named
    names = tuple(dict.fromkeys([needs] if isinstance(needs, str) else needs or ()))
    known = with_server()
    for need in names:
        if need not in known:
            raise ValueError(f"unknown need {need!r}: the course knows how to start {', '.join(map(repr, known))}")
    return names


def preload_of(named: Mapping[str, Any] | str | Iterable[str] | None) -> tuple[str, ...]:
    """What the agents of the engines named (as :func:`needs_of` reads them) import before they work: the registry's
    imports, which a warm launcher imports once, before it forks them."""
    return tuple(dict.fromkeys(module for name in needs_of(named) for module in engine(name).imports))


class Needs:
    """Start each needed server on first request (or, told what is coming, in the background at once: see
    :meth:`prepare`) and keep it for the rest of the run. Safe to use from several threads."""

    def __init__(self, workdir: Path, timeout: float = 30.0):
        self.workdir = Path(workdir)
        self.timeout = timeout
        self._stack = ExitStack()
        self._lock = threading.Lock()
        self._starting: dict[str, Future[dict[str, str]]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def prepare(self, specs: Iterable[Mapping]) -> None:
        """Start every server the ``specs`` name, each in a thread of its own, now: the run's first matrices go on
        while they start, and a matrix that needs one waits only for what is left of its start."""
        for need in dict.fromkeys(n for spec in specs for n in needs_of(spec)):
            self._future(need)

    def env_for(self, spec: Mapping[str, Any]) -> dict[str, str]:
        env = dict(spec.get("env") or {})
        for need in needs_of(spec):
            env.update(self._future(need).result())  # a server that failed to start raises here, as before
        return env

    def _future(self, need: str) -> Future[dict[str, str]]:
        (need,) = needs_of(need)
        with self._lock:
            if need not in self._starting:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=len(with_server()), thread_name_prefix="needs")
                self._starting[need] = self._pool.submit(self._start, need)
            return self._starting[need]

    def _start(self, need: str) -> dict[str, str]:
        server = engine(need).serve(self._fresh_folder(need), self.timeout)
        env = server.__enter__()
        with self._lock:
            self._stack.push(server.__exit__)  # stopped with the others at close, last started first
        return env

    def _fresh_folder(self, need: str) -> Path:
        """The server's folder: ``<workdir>/<need>``, or the first of ``<need>-1``, ``<need>-2``... that is new or
        empty. A run killed before it stopped its servers leaves its folder full (the server itself stops with
        its parent), and a server refuses a folder that holds data; another run may still be using it, so it is
        left alone rather than emptied."""
        for n in range(100):
            folder = self.workdir / (need if n == 0 else f"{need}-{n}")
            if not folder.exists() or not any(folder.iterdir()):
                return folder
        raise RuntimeError(f"{self.workdir} holds 100 {need} folders from earlier runs: remove them")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # a server still starting is up (or failed) before anything stops
        self._stack.close()

    def __enter__(self) -> "Needs":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Needs", "needs_of", "preload_of"]
