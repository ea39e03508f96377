"""Servers a crash matrix needs besides the world, named in a lesson's metadata (``"needs": "temporal"``), by the
engine registry's names.

The grader, the demo and the soak (``crashlab soak --needs temporal``) start each once, pass its address to the
agents through the environment, and stop it at the end.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from crashlab.engines.registry import WITH_SERVER, engine

NEEDS = WITH_SERVER  # the servers the course knows how to start


class Needs:
    """Start each needed server on first request and keep it for the rest of the run."""

    def __init__(self, workdir: Path, timeout: float = 30.0):
        self.workdir = Path(workdir)
        self.timeout = timeout
        self._stack = ExitStack()
        self._env: dict[str, dict[str, str]] = {}

    def env_for(self, spec: dict) -> dict[str, str]:
        env = dict(spec.get("env") or {})
        needs = spec.get("needs") or []
        for need in [needs] if isinstance(needs, str) else needs:
            if need not in self._env:
                self._env[need] = self._start(need)
            env.update(self._env[need])
        return env

    def _start(self, need: str) -> dict[str, str]:
        if need not in NEEDS:
            raise ValueError(f"unknown need {need!r}: the course knows how to start {', '.join(map(repr, NEEDS))}")
        return self._stack.enter_context(engine(need).serve(self.workdir / need, self.timeout))

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "Needs":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
