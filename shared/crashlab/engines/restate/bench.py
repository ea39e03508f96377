"""Restate in the benchmark: a service whose handler runs N trivial ``ctx.run`` steps, each one a journal entry
the server records before the handler goes on, served by this process on a loopback port (Restate pushes: the
server calls the endpoint) and invoked through the server's ingress.

Like the lesson's order agent, the recovery scene sends the invocation with the workflow id as its idempotency
key and attaches to it. The killed process takes the endpoint with it; the new process binds the very address
the invocation is pinned to (port and service name are kept in the scene's folder), registers it, sends again
(the same key finds the same invocation), asks the server to retry now (admin ``resume``) instead of waiting
out the back-off, and attaches: the journal is replayed, the interrupted step runs again, then the rest.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from crashlab.engines import pai_bench
from crashlab.engines.record import Entry, Record, Store
from crashlab.engines.restate.record import JournalReader
from crashlab.engines.workload import BenchError, Workload, Workloads, missing
from crashlab.plumbing.ports import free_port, port_taken  # the course's one way to pick and probe ports

ENDPOINT_FILE = "restate-bench-endpoint.json"
RUN_DONE = "Notification: Run"  # the journal entry that holds a ctx.run's result: the end of a long agent's turn


def _endpoint(workdir: Path, recovery: bool) -> dict:
    """Service name and port: the recovery scene's two processes share one (kept in its folder), since the
    invocation is pinned to the deployment it started on; a measurement process has its own."""
    path = workdir / ENDPOINT_FILE
    if recovery and path.exists():
        return json.loads(path.read_text())
    found = {"service": f"Bench_{os.getpid()}_{time.time_ns() % 10**9}", "port": free_port()}
    if recovery:
        path.write_text(json.dumps(found))
    return found


class Restate(Workload):
    """The endpoint (hypercorn) and an HTTP client on one event loop; each call drives the loop. The endpoint
    serves :meth:`app` (a framework integration's row swaps in its own)."""

    def __init__(self, workdir: Path, recovery: bool = False):
        import httpx
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        from crashlab.engines.restate import ENV_RESTATE_ADMIN, ENV_RESTATE_INGRESS
        from crashlab.engines.restate.client import register_deployment

        self.ingress, self.admin = os.environ.get(ENV_RESTATE_INGRESS), os.environ.get(ENV_RESTATE_ADMIN)
        if not self.ingress or not self.admin:
            raise BenchError(f"{ENV_RESTATE_INGRESS} / {ENV_RESTATE_ADMIN} are not set: run the whole benchmark (it "
                             "starts a Restate server) or set them to one's addresses")
        endpoint = _endpoint(workdir, recovery)
        self.service, port = endpoint["service"], endpoint["port"]
        self.workdir = workdir
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.loglevel = "ERROR"
        config.accesslog = None
        config.graceful_timeout = 0.5
        self.server = self.loop.create_task(serve(self.app(self.service), config, shutdown_trigger=self.stop.wait))
        deadline = time.monotonic() + 10
        while True:  # let the endpoint try to bind first: a port someone else holds answers too
            self.loop.run_until_complete(asyncio.sleep(0.01))
            if self.server.done():
                self.server.result()  # the endpoint's own error (the port taken, say), as it is
                raise BenchError(f"the Restate endpoint on 127.0.0.1:{port} stopped at once")
            if port_taken(port):
                break
            if time.monotonic() > deadline:
                raise BenchError(f"the Restate endpoint did not come up on 127.0.0.1:{port}")
        self.loop.run_until_complete(asyncio.to_thread(register_deployment, self.admin, f"http://127.0.0.1:{port}"))
        self.client = httpx.AsyncClient(timeout=120)

    def app(self, service: str):
        """The endpoint's ASGI app: a service named ``service`` whose handler ``run(n)`` returns n."""
        from crashlab.engines.restate.bench_app import bench_app

        return bench_app(service)

    def _do(self, coro) -> Any:
        return self.loop.run_until_complete(coro)

    def run(self, n: int) -> None:
        reply = self._do(self.client.post(f"{self.ingress}/{self.service}/run", json=n))
        if reply.status_code != 200 or reply.json() != n:
            raise BenchError(f"the invocation answered {reply.status_code} {reply.text[:200]!r}, not {n}")

    def _send_and_attach(self, n: int, wid: str, resume: bool) -> Any:
        from crashlab.engines.restate.bench_app import long_object_name

        target, body = (f"{long_object_name(self.service)}/{wid}", {"n": n, "result_bytes": self.result_bytes}) \
            if self.result_bytes else (self.service, n)
        sent = self._do(self.client.post(f"{self.ingress}/{target}/run/send", json=body,
                                         headers={"idempotency-key": wid}))
        if sent.status_code not in (200, 202):
            raise BenchError(f"Restate refused the invocation: {sent.status_code} {sent.text[:200]!r}")
        invocation = sent.json()["invocationId"]
        if resume and sent.json().get("status") == "PreviouslyAccepted":
            self._do(self.client.patch(f"{self.admin}/invocations/{invocation}/resume"))  # retry now, here
        reply = self._do(self.client.get(f"{self.ingress}/restate/invocation/{invocation}/attach"))
        if reply.status_code != 200:
            raise BenchError(f"the invocation failed: {reply.status_code} {reply.text[:200]!r}")
        return reply.json()

    def start_recoverable(self, n: int, wid: str) -> None:
        self._send_and_attach(n, wid, resume=False)

    def resume(self, n: int, wid: str) -> Any:
        return self._send_and_attach(n, wid, resume=True)

    def record(self, wid: str) -> Record:
        """The long agent's journal, read as the lessons read an order's: the object's name where an agent's state
        folder keeps its service's."""
        from crashlab.engines.restate.bench_app import long_object_name
        from crashlab.engines.restate.client import ENDPOINT_FILE as AGENT_ENDPOINT_FILE

        (self.workdir / AGENT_ENDPOINT_FILE).write_text(json.dumps({"service": long_object_name(self.service)}))
        return JournalReader().read(Store(self.workdir, server=self.admin), wid)

    def ends_turn(self, entry: Entry) -> bool:
        return entry.kind == RUN_DONE

    def close(self) -> None:
        self.stop.set()
        try:
            self._do(self.client.aclose())
            self._do(asyncio.wait([self.server], timeout=2))
        except Exception:  # noqa: BLE001 -- the child exits next; nothing here may hide its result
            pass


class PydanticAIRestate(Restate):
    def app(self, service: str):
        from crashlab.engines.restate.bench_app import pydantic_ai_app

        return pydantic_ai_app(service)


class RestateWorkloads(Workloads):
    kind: type[Restate] = Restate

    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        return self.kind(workdir, recovery=recovery)

    def unavailable(self, variant: str) -> str | None:
        why = missing("restate", "hypercorn")
        if why:
            return why
        from crashlab.engines.restate.server import restate_binary

        try:
            restate_binary()
        except Exception as exc:  # noqa: BLE001 -- the binary is missing: say so (and how to get it) in the row
            return f"skipped: {exc}"
        return None

    def recovery_note(self, variant: str) -> list[str]:
        return ["the new endpoint binds the dead one's address and asks the server to retry now (admin resume); the "
                "journal is replayed"]


class PydanticAIRestateWorkloads(RestateWorkloads):
    """Pydantic AI on Restate (``restate+pydantic-ai``): the bare row's endpoint and client, serving a handler that
    runs the benchmark's agent (:mod:`crashlab.engines.pai_bench`) through ``restate.ext.pydantic.RestateAgent``.
    With ``auto_wrap_tools=True`` the integration journals each model request ("Model call") and each tool call
    ("Calling step") as a ``ctx.run`` entry: each step is two journal entries."""

    preload = pai_bench.PRELOAD
    kind = PydanticAIRestate

    def unavailable(self, variant: str) -> str | None:
        return pai_bench.unavailable() or missing("restate.ext.pydantic") or super().unavailable(variant)

    def note(self, variant: str) -> list[str]:
        return ["each step is two journal entries, the model request and the tool call (auto_wrap_tools=True)"]


__all__ = ["ENDPOINT_FILE", "PydanticAIRestate", "PydanticAIRestateWorkloads", "Restate", "RestateWorkloads"]
