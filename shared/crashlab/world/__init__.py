"""The world: everything outside the agent process, started and stopped from Python or the CLI.

    with World.start(".crashlab/demo") as world:
        subprocess.run([sys.executable, "agent.py", "--order", "ORD-8842"], env=world.env())
        print(world.audit())
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from crashlab.order import ORDER_ID
from crashlab.world.ledger import LedgerError

READY_FILE = "world.json"

# Environment variables an agent process reads. The harness and World.env() set them.
ENV_MODEL_URL = "CRASHLAB_MODEL_URL"
ENV_SERVICES_URL = "CRASHLAB_SERVICES_URL"
ENV_STATE_DIR = "CRASHLAB_STATE_DIR"
ENV_CRASH_AT = "CRASHLAB_CRASH_AT"


class WorldError(RuntimeError):
    """The world could not be started, reached or stopped. The message says what to do."""


class World:
    """A running world: one server process on 127.0.0.1 with its ledgers in ``state_dir``.

    ``state_dir/ledgers`` holds the world's ledgers; ``state_dir/agent`` is where agents keep their
    own durable state (event logs, checkpoints). Use :meth:`start` or :meth:`attach`.
    """

    def __init__(self, state_dir: Path, port: int, pid: int, process: subprocess.Popen | None = None):
        self.state_dir = Path(state_dir)
        self.port = port
        self.pid = pid
        self._process = process
        self._stopped = False

    # --- life cycle -----------------------------------------------------------------------------
    @classmethod
    def start(cls, state_dir: str | os.PathLike | None = None, *, fresh: bool = True, port: int = 0,
              timeout: float = 15.0, stop_with_parent: bool = True) -> "World":
        """Start a world in its own process. ``fresh`` wipes ``state_dir`` first.

        With ``stop_with_parent`` the server exits on its own when this process dies, so a killed
        kernel or test run never leaves a server behind.
        """
        state_dir = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="crashlab-world-"))
        state_dir = state_dir.resolve()
        ready = state_dir / READY_FILE
        running = cls._from_ready_file(state_dir) if ready.exists() else None
        if running is not None:  # checked before wiping: never pull the ledgers from under a live world
            raise WorldError(f"a world is already running in {state_dir} (pid {running.pid}); "
                             f"use World.attach({str(state_dir)!r}) or stop it first")
        if fresh and state_dir.exists():
            shutil.rmtree(state_dir)
        (state_dir / "ledgers").mkdir(parents=True, exist_ok=True)
        (state_dir / "agent").mkdir(parents=True, exist_ok=True)
        ready.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "crashlab.world.server", "--state", str(state_dir / "ledgers"),
               "--port", str(port), "--ready-file", str(ready)]
        if stop_with_parent:
            cmd += ["--parent-pid", str(os.getpid())]
        log = open(state_dir / "world.log", "ab")
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if process.poll() is not None:
                tail = (state_dir / "world.log").read_text(errors="replace")[-800:]
                raise WorldError(f"the world server exited at start (code {process.returncode}):\n{tail}")
            if time.monotonic() > deadline:
                process.kill()
                raise WorldError(f"the world server did not report ready within {timeout:.0f} s")
            time.sleep(0.02)
        info = json.loads(ready.read_text())
        return cls(state_dir, info["port"], info["pid"], process)

    @classmethod
    def attach(cls, state_dir: str | os.PathLike) -> "World":
        """Connect to a world started elsewhere (for example with ``crashlab world start``)."""
        state_dir = Path(state_dir).resolve()
        world = cls._from_ready_file(state_dir)
        if world is None:
            raise WorldError(f"no world is running in {state_dir}: start one with "
                             f"`crashlab world start --state {state_dir}`")
        return world

    @classmethod
    def _from_ready_file(cls, state_dir: Path) -> "World | None":
        try:
            info = json.loads((state_dir / READY_FILE).read_text())
            world = cls(state_dir, int(info["port"]), int(info["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return world if world.is_alive() else None

    def is_alive(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL). Safe to call twice: the second call does nothing,
        so it can never signal a pid the system has since given to another process."""
        if self._stopped:
            return
        self._stopped = True
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(timeout)
            self._process = None
        else:
            try:
                os.kill(self.pid, 15)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while self.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        (self.state_dir / READY_FILE).unlink(missing_ok=True)

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what agents and lessons need ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ledger_dir(self) -> Path:
        return self.state_dir / "ledgers"

    @property
    def agent_dir(self) -> Path:
        """Where agents keep their own durable state."""
        return self.state_dir / "agent"

    def env(self, crash_at: str | None = None, **extra: str) -> dict[str, str]:
        """The environment for an agent process: endpoints, state directory, and an optional crash point."""
        env = dict(os.environ)
        env.pop(ENV_CRASH_AT, None)
        env.update({ENV_MODEL_URL: self.url, ENV_SERVICES_URL: self.url, ENV_STATE_DIR: str(self.agent_dir),
                    "PYTHONUNBUFFERED": "1"})
        if crash_at:
            env[ENV_CRASH_AT] = crash_at
        env.update(extra)
        return env

    def inject(self, fault: str, times: int = 1, arg: str | None = None) -> None:
        """Arm a fault: ``lost_ack:TOOL`` (commit, then drop the reply), ``latency:TOOL`` (arg: seconds
        in flight), ``malformed_reply`` (arg: unknown_tool, missing_args or bad_type)."""
        from crashlab.world.policy import MALFORMED_REPLIES

        if fault == "malformed_reply" and arg not in MALFORMED_REPLIES:
            raise ValueError(f"malformed_reply needs arg= one of {MALFORMED_REPLIES}")
        reply = httpx.post(f"{self.url}/_admin/faults", json={"name": fault, "remaining": times, "arg": arg}, timeout=5)
        reply.raise_for_status()

    def audit(self, order_id: str = ORDER_ID):
        """What the world saw for ``order_id``: effects, duplicates, model calls, repeats."""
        from crashlab.audit import audit

        return audit(self.ledger_dir, order_id)

    def __repr__(self) -> str:
        return f"World(url={self.url!r}, state_dir={str(self.state_dir)!r})"


__all__ = ["World", "WorldError", "LedgerError", "ENV_MODEL_URL", "ENV_SERVICES_URL", "ENV_STATE_DIR", "ENV_CRASH_AT"]
