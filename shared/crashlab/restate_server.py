"""The Restate server for the Restate lesson (issue 14): the binary npm's ``@restatedev/restate-server`` puts
under ``.venv/restate`` (``make setup``), started on free loopback ports with its data in a scratch folder, plus
the small helpers an agent process needs to reach it.

    with restate_environment(tmp / "restate") as server:   # agents read CRASHLAB_RESTATE_INGRESS / _ADMIN
        ...

Restate *pushes*: the server calls the service's HTTP endpoint, which the agent process hosts. An invocation in
flight is pinned to the deployment (the endpoint's URI) it started on, so a resumed agent binds the same
address again: :func:`endpoint_for` chooses one port per world and remembers it in the world's agent state
directory. One server serves many worlds at once (one per crash-matrix row), and the newest deployment of a
service takes its new invocations; so each world gets its own service name too (``Order_<tag>``), and two
rows never route an order to each other's process.

The server runs under the same tiny supervisor as the Temporal dev server (``python -m crashlab.temporal_server
supervise --parent-pid``), so a killed kernel or test run never leaves a server behind.
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
import uuid
from pathlib import Path

import httpx

from crashlab.agent import AgentError
from crashlab.chosen_once import chosen_once
from crashlab.scratch import remove_scratch
from crashlab.temporal_server import free_port, serve_until_interrupted, stop_supervisor

RESTATE_VERSION = "1.7.12"  # @restatedev/restate-server, pinned in the Makefile's setup
ENV_RESTATE_BIN = "CRASHLAB_RESTATE_BIN"
ENV_RESTATE_INGRESS = "CRASHLAB_RESTATE_INGRESS"
ENV_RESTATE_ADMIN = "CRASHLAB_RESTATE_ADMIN"
ENDPOINT_FILE = "restate-endpoint.json"
# Where restate_binary looks: <this environment>/restate -- .venv/restate after `make setup`, but a conda or
# Binder environment has its own prefix, so the fix names this one.
_INSTALL = (f"run `make setup`, or `npm install --prefix {Path(sys.prefix) / 'restate'} "
            f"@restatedev/restate-server@{RESTATE_VERSION}` (needs Node.js's npm)")

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
"""


_TUNED_RETRY = """\
[default-retry-policy]
initial-interval = "100ms"
exponentiation-factor = 2.0
max-interval = "1s"
max-attempts = 1000
on-max-attempts = "pause"
"""


class RestateServerError(RuntimeError):
    """The server could not be found, started, reached or stopped. The message says what to do."""


class RestateUnavailable(AgentError):
    """The Restate server cannot be reached. An agent prints this as one line and exits 2."""


# --- finding the binary ------------------------------------------------------------------------------------------
def _platform_package() -> str:
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
    candidate = root / _platform_package() / "bin" / "restate-server"
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
        ingress = free_port()
        admin = free_port(avoid={ingress})
        node = free_port(avoid={ingress, admin})
        config = data_dir / "restate.toml"
        config.write_text(_CONFIG.format(partitions=partitions, node_port=node, admin_port=admin,
                                         ingress_port=ingress, no_ui=str(not ui).lower(),
                                         inactivity=inactivity_timeout, abort=abort_timeout,
                                         retry=_TUNED_RETRY if tuned else ""))
        cmd = [str(binary), "--config-file", str(config), "--base-dir", str(data_dir / "data"), "--no-logo",
               "--listen-mode", "tcp", "--node-name", "crashlab"]
        supervisor = [sys.executable, "-P", "-m", "crashlab.temporal_server", "supervise"]
        if stop_with_parent:
            supervisor += ["--parent-pid", str(os.getpid())]
        log_path = data_dir / "restate.log"
        env = dict(os.environ, DO_NOT_TRACK="1")
        env.pop("RESTATE_CONFIG", None)
        began = time.monotonic()
        with open(log_path, "ab") as log:
            process = subprocess.Popen(supervisor + ["--"] + cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                       stdin=subprocess.DEVNULL, start_new_session=True, cwd=data_dir)
        server = cls(data_dir, ingress, admin, node, process)
        while not server.is_ready():
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-800:]
                hint = " (is a port taken?)" if "in use" in tail.lower() else ""
                raise RestateServerError(f"the Restate server exited at start (code {process.returncode}){hint}:\n{tail}")
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
            stop_supervisor(self._process, timeout)
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


# --- client side: what an agent process uses ------------------------------------------------------------------------
def restate_urls() -> tuple[str, str]:
    """(ingress, admin) from the environment, or :class:`RestateUnavailable`."""
    ingress, admin = os.environ.get(ENV_RESTATE_INGRESS), os.environ.get(ENV_RESTATE_ADMIN)
    if not ingress or not admin:
        raise RestateUnavailable(f"{ENV_RESTATE_INGRESS} / {ENV_RESTATE_ADMIN} are not set, so there is no Restate "
                                 "server to talk to; start one with `crashlab.restate_server.RestateServer.start(DIR)` "
                                 "and put `server.env()` in the agent's environment")
    return ingress, admin


def register_deployment(admin_url: str, endpoint_url: str, *, force: bool = False, timeout: float = 10.0) -> dict:
    """``POST /deployments``: the server calls the endpoint's discovery and records its services. Registering the
    same URI with the same services again is accepted (the same deployment id comes back)."""
    try:
        reply = httpx.post(f"{admin_url}/deployments", json={"uri": endpoint_url, "force": force}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise RestateUnavailable(f"cannot reach the Restate admin API at {admin_url} ({type(exc).__name__})") from None
    if reply.status_code not in (200, 201):
        raise RestateUnavailable(f"registering {endpoint_url} at {admin_url} failed: {reply.status_code} "
                                 f"{' '.join(reply.text.split())[:300]}")
    return reply.json()


def endpoint_for(state_dir: str | os.PathLike, timeout: float = 10.0) -> dict:
    """This world's service name and endpoint port, chosen on first use and remembered in its agent state
    directory (:func:`crashlab.chosen_once.chosen_once`), so a resumed agent binds the very address its
    in-flight invocation is pinned to."""
    return chosen_once(Path(state_dir) / ENDPOINT_FILE,
                       # a name for a new world, not a key for a repeated effect
                       lambda: json.dumps({"service": f"Order_{uuid.uuid4().hex[:10]}", "port": free_port()}),
                       lambda text: json.loads(text) or None, timeout=timeout,
                       held_too_long=lambda lock: RestateUnavailable(f"another process has held {lock} for "
                                                                     f"{timeout:.0f} s"))


# --- the agent's side of the push model: serve the endpoint, send the order once, attach, and read the server --
def port_taken(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.asynccontextmanager
async def serve_endpoint(app, port: int, admin_url: str | None = None):
    """Serve the ASGI ``app`` (``restate.app(...)``) on ``127.0.0.1:port`` for the block, and register it with the
    server at ``admin_url``; yields the endpoint's URL -- or None when another process already serves that port
    (a second resumer: it only attaches)."""
    import asyncio

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    if port_taken(port):
        yield None
        return
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.loglevel = "ERROR"  # not the "no lifespan support" warning of every start
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = asyncio.Event()
    server = asyncio.ensure_future(serve(app, config, shutdown_trigger=stop.wait))
    for _ in range(250):
        if server.done() or port_taken(port):
            break
        await asyncio.sleep(0.02)
    url = f"http://127.0.0.1:{port}"
    if server.done() and isinstance(server.exception(), OSError):
        url, server = None, None  # a resumer started at the same moment bound it first: it serves, we attach
    elif server.done():
        server.result()  # any other failure to serve is an error
    try:
        if url and admin_url:
            await asyncio.to_thread(register_deployment, admin_url, url)
        yield url
    finally:
        stop.set()
        if server is not None:
            await asyncio.wait([server], timeout=2)
            if server.done():
                server.exception()  # retrieved: a late bind error is not worth a warning


def admin_sql(admin_url: str, query: str, timeout: float = 10.0) -> list[dict]:
    """Rows of a SQL query over the server's own tables (``sys_invocation``, ``sys_journal``, ``state`` ...)."""
    try:
        reply = httpx.post(f"{admin_url}/query", json={"query": query}, headers={"accept": "application/json"},
                           timeout=timeout)
    except httpx.HTTPError as exc:
        raise RestateUnavailable(f"cannot reach the Restate admin API at {admin_url} ({type(exc).__name__})") from None
    if reply.status_code != 200:
        raise RestateUnavailable(f"the query failed: {reply.status_code} {' '.join(reply.text.split())[:300]}")
    return reply.json()["rows"]


def invocation_row(admin_url: str, invocation_id: str) -> dict:
    """The server's row for one invocation: status, pinned deployment, retry count, last failure ..."""
    rows = admin_sql(admin_url, f"SELECT * FROM sys_invocation WHERE id = '{_quoted(invocation_id)}'")
    return rows[0] if rows else {}


def journal_names(admin_url: str, invocation_id: str) -> list[str]:
    """The names of the ``ctx.run`` steps in an invocation's journal, in order."""
    rows = admin_sql(admin_url, "SELECT index, entry_type, name FROM sys_journal WHERE id = "
                                f"'{_quoted(invocation_id)}' ORDER BY index")
    return [row["name"] for row in rows if row.get("entry_type", "").endswith("Run") and row.get("name")]


def stuck_reason(admin_url: str, invocation_id: str) -> str | None:
    """Why an invocation keeps failing in a way no retry mends (its code does not match its journal, or it does
    not run at all), or None. A dead endpoint is not stuck: the next process serves it."""
    row = invocation_row(admin_url, invocation_id)
    failure = (row.get("last_failure") or "").strip()
    code = row.get("last_failure_error_code")
    if not failure or row.get("status") == "completed":
        return None
    first = " ".join(failure.split("Traceback")[0].split())[:400]  # the message, not the endpoint's traceback
    if "NotImplementedError" in failure:
        return f"its code is not finished: a `raise NotImplementedError()` is still in it ({first})"
    if str(code) in ("570", "571") or "mismatch" in failure.lower():
        return f"its handler fails the same way on every retry ({first})"
    return None


async def attach(ingress_url: str, admin_url: str, invocation_id: str, wait_s: float):
    """Wait for an invocation's result (``GET /restate/invocation/{id}/attach``), checking twice a second that it is
    not stuck; the HTTP reply, or AgentError."""
    import asyncio

    async with httpx.AsyncClient(timeout=wait_s) as client:
        waiting = asyncio.ensure_future(client.get(f"{ingress_url}/restate/invocation/{invocation_id}/attach"))
        deadline = asyncio.get_running_loop().time() + wait_s
        try:
            while not waiting.done():
                await asyncio.wait([waiting], timeout=0.5)
                if waiting.done():
                    break
                reason = await asyncio.to_thread(stuck_reason, admin_url, invocation_id)
                if reason:
                    raise AgentError(f"invocation {invocation_id} is stuck: {reason}")
                if asyncio.get_running_loop().time() > deadline:
                    raise AgentError(f"invocation {invocation_id} is still running after {wait_s:.0f} s; run this "
                                     "command again to keep working on it")
            return waiting.result()
        except httpx.TimeoutException:
            raise AgentError(f"invocation {invocation_id} is still running after {wait_s:.0f} s; run this command "
                             "again to keep working on it") from None
        except httpx.HTTPError as exc:
            raise RestateUnavailable(f"cannot reach the Restate server at {ingress_url} ({type(exc).__name__})") from None
        finally:
            waiting.cancel()


def call_handler(ingress_url: str, service: str, key: str, handler: str, body=None, timeout: float = 10.0):
    """Call a virtual object's handler through the ingress and wait for its answer (a shared handler answers
    while the exclusive one runs or waits)."""
    reply = httpx.post(f"{ingress_url}/{service}/{key}/{handler}", json=body, timeout=timeout)
    reply.raise_for_status()
    return reply.json()


def resolve_awakeable(ingress_url: str, awakeable_id: str, value, timeout: float = 10.0) -> None:
    """Complete an awakeable from outside: ``POST /restate/awakeables/{id}/resolve`` with a JSON value."""
    reply = httpx.post(f"{ingress_url}/restate/awakeables/{awakeable_id}/resolve", json=value, timeout=timeout)
    reply.raise_for_status()


def _quoted(text: str) -> str:
    return str(text).replace("'", "''")


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
    serve_until_interrupted(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["RestateServer", "RestateServerError", "RestateUnavailable", "restate_binary", "restate_environment",
           "restate_urls", "register_deployment", "endpoint_for", "ENV_RESTATE_INGRESS", "ENV_RESTATE_ADMIN",
           "RESTATE_VERSION", "serve_endpoint", "admin_sql", "invocation_row", "journal_names", "stuck_reason",
           "attach", "call_handler", "resolve_awakeable", "port_taken"]
