"""The Restate server for the Restate lesson: the binary npm's ``@restatedev/restate-server`` puts
under ``.venv/restate`` (``make setup``), started on free loopback ports with its data in a scratch folder, started and stopped here;
what an agent process uses to reach it is :mod:`crashlab.engines.restate.client`.

    with restate_environment(tmp / "restate") as server:   # agents read CRASHLAB_RESTATE_INGRESS / _ADMIN
        ...

Restate *pushes*: the server calls the service's HTTP endpoint, which the agent process hosts. An invocation in
flight is pinned to the deployment (the endpoint's URI) it started on, so a resumed agent binds the same
address again: :func:`endpoint_for` chooses one port per world and remembers it in the world's agent state
directory. One server serves many worlds at once (one per crash-matrix row), and the newest deployment of a
service takes its new invocations; so each world gets its own service name too (``Order_<tag>``), and two
rows never route an order to each other's process.

The server runs under the same tiny supervisor as the Temporal dev server (:mod:`crashlab.plumbing.supervisor`), so a killed kernel or test run never leaves a server behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from crashlab.engines.restate import (ENV_RESTATE_ADMIN, ENV_RESTATE_BIN, ENV_RESTATE_INGRESS, RESTATE_VERSION,
                                      RestateServerError)
from crashlab.engines.restate.client import register_deployment
from crashlab.plumbing import supervisor
from crashlab.plumbing.ports import PortTaken, free_port, retry_on_taken_port
from crashlab.plumbing.scratch import remove_scratch

# Where restate_binary looks: <this environment>/restate -- .venv/restate after `make setup`, but a conda or
# Binder environment has its own prefix, so the fix names this one.
_INSTALL = (f"run `make setup`, or `python -m crashlab.engines.restate.fetch {Path(sys.prefix) / 'restate'}` "
            "(no Node.js needed)")

# What the course changes from the server's defaults: a small footprint on a shared 2-core machine, nothing
# beyond loopback, and an invocation whose endpoint died retried within a second instead of after 500 ms,
# 1 s, 2 s, 4 s ... (the service's own retry policy, see the agent, can tighten this further).
_CONFIG = """\
default-num-partitions = {partitions}
rocksdb-total-memory-size = "256 MiB"
disable-telemetry = true
log-filter = "warn,restate=warn"
log-disable-ansi-codes = true
bind-address = "127.0.0.1:{node_port}"
advertised-address = "http://127.0.0.1:{node_port}/"

{retry}
[admin]
bind-address = "127.0.0.1:{admin_port}"
disable-web-ui = {no_ui}

[ingress]
bind-address = "127.0.0.1:{ingress_port}"

[worker.invoker]
inactivity-timeout = "{inactivity}"
abort-timeout = "{abort}"
tmp-dir = {tmp_dir}
"""


# The invoker's spill folders (invoker-<id>, one per partition) go in the server's own folder, removed with it:
# left to itself the server makes them in the temporary folder, and nothing ever removes them.
INVOKER_TMP = "invoker-tmp"

_TUNED_RETRY = """\
[default-retry-policy]
initial-interval = "100ms"
exponentiation-factor = 2.0
max-interval = "1s"
max-attempts = 1000
on-max-attempts = "pause"
"""


# --- finding the binary ------------------------------------------------------------------------------------------
def platform_package() -> str:
    """The npm package holding this platform's binary (an optional dependency of ``@restatedev/restate-server``)."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower(), "")
    os_name = {"linux": "linux", "darwin": "darwin"}.get(sys.platform, sys.platform)
    return f"@restatedev/restate-server-{os_name}-{arch}"


def restate_binary() -> Path:
    """The ``restate-server`` binary: $CRASHLAB_RESTATE_BIN, else the one npm put under ``<venv>/restate`` (the
    platform package, an optional dependency of ``@restatedev/restate-server``), else the first on PATH."""
    explicit = os.environ.get(ENV_RESTATE_BIN)
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RestateServerError(f"{ENV_RESTATE_BIN}={explicit} is not an executable file; unset it to use the "
                                     f"binary `make setup` installs ({_INSTALL})")
        return path
    root = Path(sys.prefix) / "restate" / "node_modules"
    candidate = root / platform_package() / "bin" / "restate-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("restate-server")
    if found:
        return Path(found)
    raise RestateServerError(f"the `restate-server` binary was not found (looked for {candidate} and on PATH); {_INSTALL}")


# --- the server ----------------------------------------------------------------------------------------------------
class RestateServer:
    """A running Restate server on 127.0.0.1, its data in ``data_dir``."""

    def __init__(self, data_dir: Path, ingress_port: int, admin_port: int, node_port: int,
                 process: subprocess.Popen):
        self.data_dir = Path(data_dir)
        self.ingress_port, self.admin_port, self.node_port = ingress_port, admin_port, node_port
        self._process = process
        self.pid = process.pid  # the supervisor's
        self.started_in: float | None = None  # seconds from launch to healthy
        self._stopped = False

    @classmethod
    def start(cls, data_dir: str | os.PathLike, *, timeout: float = 30.0, partitions: int = 2,
              inactivity_timeout: str = "1m", abort_timeout: str = "10m", ui: bool = False, tuned: bool = True,
              stop_with_parent: bool = True) -> "RestateServer":
        """Start a fresh server with its data in ``data_dir`` (created; must be empty or new) and wait until
        both its admin API and its ingress answer, at most ``timeout`` seconds. ``tuned=False`` keeps the
        server's default retry policy (500 ms doubling to 1 min, 70 attempts, then pause)."""
        binary = restate_binary()
        data_dir = Path(data_dir).resolve()
        if data_dir.exists() and any(data_dir.iterdir()):
            raise RestateServerError(f"{data_dir} is not empty; give the Restate server a new or empty folder")
        data_dir.mkdir(parents=True, exist_ok=True)
        launch = lambda: cls._launch(binary, data_dir, timeout, partitions, inactivity_timeout,  # noqa: E731
                                     abort_timeout, ui, tuned, stop_with_parent)
        try:
            return retry_on_taken_port(launch)
        except PortTaken as exc:
            raise RestateServerError(str(exc)) from None

    @classmethod
    def _launch(cls, binary: Path, data_dir: Path, timeout: float, partitions: int, inactivity_timeout: str,
                abort_timeout: str, ui: bool, tuned: bool, stop_with_parent: bool) -> "RestateServer":
        """One attempt on three fresh ports: another process may take one before the server binds it."""
        shutil.rmtree(data_dir / "data", ignore_errors=True)  # what a failed attempt left
        ingress = free_port()
        admin = free_port(avoid={ingress})
        node = free_port(avoid={ingress, admin})
        config = data_dir / "restate.toml"
        config.write_text(_CONFIG.format(partitions=partitions, node_port=node, admin_port=admin,
                                         ingress_port=ingress, no_ui=str(not ui).lower(),
                                         inactivity=inactivity_timeout, abort=abort_timeout,
                                         tmp_dir=json.dumps(str(data_dir / INVOKER_TMP)),
                                         retry=_TUNED_RETRY if tuned else ""))
        cmd = [str(binary), "--config-file", str(config), "--base-dir", str(data_dir / "data"), "--no-logo",
               "--listen-mode", "tcp", "--node-name", "crashlab"]
        log_path = data_dir / "restate.log"
        env = dict(os.environ, DO_NOT_TRACK="1")
        env.pop("RESTATE_CONFIG", None)
        began = time.monotonic()
        with open(log_path, "ab") as log:
            process = subprocess.Popen(supervisor.command(stop_with_parent) + ["--"] + cmd, stdout=log,
                                       stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL,
                                       start_new_session=True, cwd=data_dir)
        server = cls(data_dir, ingress, admin, node, process)
        while not server.is_ready():
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-800:]
                if "in use" in tail.lower():
                    raise PortTaken(f"the Restate server could not bind its ports, three times:\n{tail}")
                raise RestateServerError(f"the Restate server exited at start (code {process.returncode}):\n{tail}")
            if time.monotonic() - began > timeout:
                server.stop()
                raise RestateServerError(f"the Restate server did not become healthy within {timeout:.0f} s; "
                                         f"see {log_path}")
            time.sleep(0.05)
        server.started_in = time.monotonic() - began
        return server

    def is_ready(self) -> bool:
        """Both APIs answer *and* the partitions are up: just after start the health checks already pass while a
        query of the server's tables still fails with "node lookup for partition 1 failed"."""
        try:
            admin = httpx.get(f"{self.admin_url}/health", timeout=2)
            ingress = httpx.get(f"{self.ingress_url}/restate/health", timeout=2)
            if admin.status_code != 200 or ingress.status_code != 200:
                return False
            tables = httpx.post(f"{self.admin_url}/query", json={"query": "SELECT id FROM sys_invocation LIMIT 1"},
                                headers={"accept": "application/json"}, timeout=2)
        except httpx.HTTPError:
            return False
        return tables.status_code == 200

    def register(self, endpoint_url: str, *, force: bool = False, timeout: float = 10.0) -> dict:
        """Register (discover) the service deployment at ``endpoint_url``; the server's answer (its ``id`` and
        ``services``)."""
        return register_deployment(self.admin_url, endpoint_url, force=force, timeout=timeout)

    def stop(self, timeout: float = 10.0, *, remove: bool = False) -> None:
        """Stop the server (SIGTERM to its supervisor, then SIGKILL to its group); with ``remove`` also delete
        its data folder. Safe to call twice."""
        if not self._stopped:
            self._stopped = True
            supervisor.stop_supervisor(self._process, timeout)
        if remove:
            remove_scratch(self.data_dir)

    def __enter__(self) -> "RestateServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def ingress_url(self) -> str:
        return f"http://127.0.0.1:{self.ingress_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def env(self) -> dict[str, str]:
        """The variables an agent process needs to find this server."""
        return {ENV_RESTATE_INGRESS: self.ingress_url, ENV_RESTATE_ADMIN: self.admin_url}

    def __repr__(self) -> str:
        return f"RestateServer(ingress={self.ingress_url!r}, admin={self.admin_url!r}, data={str(self.data_dir)!r})"


@contextlib.contextmanager
def restate_environment(data_dir: str | os.PathLike, *, remove: bool = True, **start_kwargs):
    """A server for the duration of a block, its addresses in ``os.environ`` so every agent process started
    meanwhile (the crash harness copies ``os.environ``) finds it."""
    saved = {name: os.environ.get(name) for name in (ENV_RESTATE_INGRESS, ENV_RESTATE_ADMIN)}
    server = RestateServer.start(data_dir, **start_kwargs)
    os.environ.update(server.env())
    try:
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop(remove=remove)


@contextlib.contextmanager
def serve(folder: Path, timeout: float = 30.0):
    """A fresh server in ``folder`` for the block (the engine registry's way to start one); yields its env. Its
    data is removed at the end."""
    server = RestateServer.start(folder, timeout=timeout)
    try:
        yield server.env()
    finally:
        server.stop(remove=True)


def binary_version() -> str:
    """What ``restate-server --version`` says of the binary found here (its last word)."""
    out = subprocess.run([str(restate_binary()), "--version"], capture_output=True, text=True, timeout=10).stdout
    return out.split()[-1]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Run a Restate server for the course (Ctrl-C stops it).")
    parser.add_argument("--data", required=True, help="a new or empty folder for its data")
    parser.add_argument("--ui", action="store_true", help="also serve the admin Web UI")
    args = parser.parse_args(argv)
    try:
        server = RestateServer.start(args.data, ui=args.ui)
    except RestateServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Restate server: ingress {server.ingress_url}, admin {server.admin_url} "
          f"(healthy after {server.started_in:.2f} s)")
    for name, value in server.env().items():
        print(f"  export {name}={value}")
    supervisor.serve_until_interrupted(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["ENV_RESTATE_BIN", "RESTATE_VERSION", "RestateServer", "RestateServerError", "binary_version", "main",
           "restate_binary", "restate_environment", "serve"]
