"""Running the children and the servers, from the caller's process: the environment a child gets
(``_child_env``), spawning it in its own process group and killing that group (``_spawn``, ``_kill_group``,
``_run_child``, ``_tail``, ``_read_json``), whether an engine can run here at all (``availability``), the
PostgreSQL cluster and the Temporal and Restate servers, started on first use (``Servers``), and one engine's measurement
and recovery scene as child processes (``measure_engine``, ``recover_engine``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from crashlab.bench.common import BenchError, child_scrubbed, variants, workloads_for
from crashlab.engines.registry import engine_of_variant
from crashlab.engines.workload import ENV_BLOCK_AT, ENV_MARKER

T = TypeVar("T")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # shared/, as parents[1] was from crashlab/bench.py


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    for name in child_scrubbed():
        env.pop(name, None)
    env.update(extra or {})
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _spawn(args: list[str], env: dict[str, str], log: Path, timeout: float) -> subprocess.Popen:
    args = [*args, "--max-seconds", f"{timeout + 5:g}"]  # the child's own limit, should the parent die
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "crashlab.bench", *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _tail(log: Path, n: int = 300) -> str:
    try:
        text = log.read_text(errors="replace").strip()
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "")[-n:]


def _run_child(args: list[str], env: dict[str, str], log: Path, timeout: float, what: str) -> None:
    proc = _spawn(args, env, log, timeout)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise BenchError(f"{what} timed out after {timeout:g} s") from None
    finally:
        _kill_group(proc)  # nothing the child started may outlive it
    if rc != 0:
        raise BenchError(f"{what} failed (exit {rc}): {_tail(log) or 'no output'}")


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise BenchError(f"{what} wrote no result") from None


def availability(engine: str) -> str | None:
    """None if the engine's row can be measured here, else why not (its workload says)."""
    if engine not in variants():
        return f"unknown engine (known: {', '.join(variants())})"
    return workloads_for(engine).unavailable(engine)


class Servers:
    """Starts what the rows' engines need on first use, once per run -- an engine's server from the registry,
    or what its workload's ``servers_env`` asks for (DBOS's throwaway PostgreSQL) -- and stops it at exit."""

    def __init__(self, workdir: Path, stack: contextlib.ExitStack, timeout: float):
        self.workdir, self.stack, self.timeout = workdir, stack, timeout
        self._shared: dict[str, Any] = {}

    def shared(self, name: str, start: Callable[[], T]) -> T:
        """``start()``'s result, started once per run under ``name`` (``start`` may enter ``self.stack``)."""
        if name not in self._shared:
            self._shared[name] = start()
        return self._shared[name]

    def env_for(self, engine: str) -> dict[str, str]:
        env = dict(workloads_for(engine).servers_env(engine, self))
        entry = engine_of_variant(engine)
        if entry is not None and entry.server is not None:
            env.update(self.shared(entry.name, lambda: self.stack.enter_context(
                entry.serve(self.workdir / entry.name, min(60.0, self.timeout)))))
        return env


def measure_engine(engine: str, servers: Servers, workdir: Path, steps: int, repeats: int,
                    timeout: float, tag: str = "") -> list[float]:
    env = _child_env(servers.env_for(engine))
    out = workdir / f"{engine}{tag}.json"
    _run_child(["--engine", engine, "--steps", str(steps), "--repeats", str(repeats), "--workdir", str(workdir),
                "--json", str(out)], env, workdir / f"{engine}{tag}.log", timeout, f"the {engine} measurement")
    return _read_json(out, f"the {engine} measurement")["samples_ms"]


def recover_engine(engine: str, servers: Servers, workdir: Path, steps: int, timeout: float,
                   kill_at: int | None = None, result_bytes: int = 0) -> dict:
    """The recovery scene of one row: a child runs ``steps`` steps into step ``kill_at`` (default: past the middle)
    and is SIGKILLed there, a new child finishes the workflow. With ``result_bytes``, the workflow is the engine's long
    agent (the length axis), and the result has ``sizes``: its record's bytes once each turn was recorded."""
    scene = workdir / (f"recovery-{engine}" + (f"-{steps}-turns" if result_bytes else ""))
    scene.mkdir(parents=True, exist_ok=True)
    env = _child_env(servers.env_for(engine))
    wid = f"recover-{engine}-{os.getpid()}-{time.time_ns()}"
    marker = scene / "reached"
    kill_at = kill_at or steps // 2 + 1
    common = ["--engine", engine, "--steps", str(steps), "--workdir", str(scene), "--wid", wid,
              "--child-result-bytes", str(result_bytes)]
    log = scene / "crash.log"
    proc = _spawn(common + ["--phase", "crash"], {**env, ENV_BLOCK_AT: str(kill_at), ENV_MARKER: str(marker)}, log,
                  timeout)
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if proc.poll() is not None:
                raise BenchError(f"the {engine} process to be killed exited early (exit {proc.returncode}): "
                                 f"{_tail(log) or 'no output'}")
            if time.monotonic() > deadline:
                raise BenchError(f"the {engine} workflow did not reach step {kill_at} within {timeout:g} s")
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        _kill_group(proc)
    out = scene / "resume.json"
    t_spawn = time.time()
    _run_child(common + ["--phase", "resume", "--json", str(out)], env, scene / "resume.log", timeout,
               f"the {engine} recovery")
    got = _read_json(out, f"the {engine} recovery")
    if got.get("result") != steps:
        raise BenchError(f"the recovered {engine} workflow returned {got.get('result')!r}, not {steps}")
    return {"recovery_s": got["t_done"] - t_spawn, "recovery_startup_s": got["t_ready"] - t_spawn,
            "steps_run": got["steps_run"], "sizes": got.get("sizes")}
