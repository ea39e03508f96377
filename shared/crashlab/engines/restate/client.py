"""What an agent process uses to reach the Restate server, and to host the endpoint Restate pushes to.

Restate *pushes*: the server calls the service's HTTP endpoint, which the agent process hosts. An invocation in
flight is pinned to the deployment (the endpoint's URI) it started on, so a resumed agent binds the same
address again: :func:`endpoint_for` chooses one port per world and remembers it in the world's agent state
directory. Each world gets its own service name too (``Order_<tag>``), so two crash-matrix rows sharing one
server never route an order to each other's process. Nothing here starts a server.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path

import httpx

from crashlab.engines.restate import ENV_RESTATE_ADMIN, ENV_RESTATE_INGRESS
from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.errors import AgentError
from crashlab.plumbing.chosen_once import chosen_once
from crashlab.plumbing.ports import free_port, port_taken

ENDPOINT_FILE = "restate-endpoint.json"


class RestateUnavailable(AgentError):
    """The Restate server cannot be reached. An agent prints this as one line and exits 2."""


def restate_urls() -> tuple[str, str]:
    """(ingress, admin) from the environment, or :class:`RestateUnavailable`."""
    ingress, admin = os.environ.get(ENV_RESTATE_INGRESS), os.environ.get(ENV_RESTATE_ADMIN)
    if not ingress or not admin:
        raise RestateUnavailable(f"{ENV_RESTATE_INGRESS} / {ENV_RESTATE_ADMIN} are not set, so there is no Restate "
                                 "server to talk to; start one with `crashlab.engines.restate.RestateServer.start(DIR)` "
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
                                 f"{cut_at_word(' '.join(reply.text.split()), 300)}")
    return reply.json()


def endpoint_for(state_dir: str | os.PathLike, timeout: float = 10.0) -> dict:
    """This world's service name and endpoint port, chosen on first use and remembered in its agent state
    directory (:func:`crashlab.plumbing.chosen_once.chosen_once`), so a resumed agent binds the very address its
    in-flight invocation is pinned to."""
    return chosen_once(Path(state_dir) / ENDPOINT_FILE,
                       # a name for a new world, not a key for a repeated effect
                       lambda: json.dumps({"service": f"Order_{uuid.uuid4().hex[:10]}", "port": free_port()}),
                       lambda text: json.loads(text) or None, timeout=timeout,
                       held_too_long=lambda lock: RestateUnavailable(f"another process has held {lock} for "
                                                                     f"{timeout:.0f} s"))


# --- the agent's side of the push model: serve the endpoint, send the order once, attach, and read the server --
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
        url, server = None, None  # type: ignore[assignment]  # a resumer bound it first: it serves, we attach
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
        raise RestateUnavailable(f"the query failed: {reply.status_code} {cut_at_word(' '.join(reply.text.split()), 300)}")
    return reply.json()["rows"]


def invocation_row(admin_url: str, invocation_id: str) -> dict:
    """The server's row for one invocation: status, pinned deployment, retry count, last failure ..."""
    rows = admin_sql(admin_url, f"SELECT * FROM sys_invocation WHERE id = '{sql_quoted(invocation_id)}'")
    return rows[0] if rows else {}


def journal_names(admin_url: str, invocation_id: str) -> list[str]:
    """The names of the ``ctx.run`` steps in an invocation's journal, in order."""
    rows = admin_sql(admin_url, "SELECT index, entry_type, name FROM sys_journal WHERE id = "
                                f"'{sql_quoted(invocation_id)}' ORDER BY index")
    return [row["name"] for row in rows if row.get("entry_type", "").endswith("Run") and row.get("name")]


def stuck_reason(admin_url: str, invocation_id: str) -> str | None:
    """Why an invocation keeps failing in a way no retry mends (its code does not match its journal, or it does
    not run at all), or None. A dead endpoint is not stuck: the next process serves it."""
    row = invocation_row(admin_url, invocation_id)
    failure = (row.get("last_failure") or "").strip()
    code = row.get("last_failure_error_code")
    if not failure or row.get("status") == "completed":
        return None
    first = cut_at_word(" ".join(failure.split("Traceback")[0].split()), 800)  # the message, not the traceback
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


def sql_quoted(text: str) -> str:
    return str(text).replace("'", "''")


__all__ = ["ENV_RESTATE_ADMIN", "ENV_RESTATE_INGRESS", "RestateUnavailable", "admin_sql", "attach", "call_handler",
           "endpoint_for", "invocation_row", "journal_names", "port_taken", "register_deployment", "resolve_awakeable",
           "restate_urls", "serve_endpoint", "sql_quoted", "stuck_reason", "ENDPOINT_FILE"]
