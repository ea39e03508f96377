"""Servers a crash matrix needs besides the world, named in a lesson's metadata (``"needs": "temporal"`` or ``"restate"``).

The grader, the demo and the soak (``crashlab soak --needs temporal``) start them once, pass their address
to the agents through the environment, and stop them at the end.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

NEEDS = ("temporal", "restate")  # the servers the course knows how to start


class Needs:
    """Start each needed server on first request and keep it for the rest of the run."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
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
        if need == "temporal":
            from crashlab.engines.temporal import TemporalServer

            server = self._stack.enter_context(TemporalServer.start(self.workdir / "temporal", reuse=False, fresh=True))
            return server.env()
        if need == "restate":
            from crashlab.engines.restate import RestateServer

            server = RestateServer.start(self.workdir / "restate")
            self._stack.callback(server.stop, remove=True)
            return server.env()
        raise ValueError(f"unknown need {need!r}: the course knows how to start {', '.join(map(repr, NEEDS))}")

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "Needs":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
