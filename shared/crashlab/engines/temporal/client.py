"""What an agent process uses to reach the Temporal server: its address from the environment, the world's own
namespace, a quiet runtime and a connected client. Nothing here starts a server."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.envnames import state_dir
from crashlab.errors import AgentError
from crashlab.plumbing.chosen_once import chosen_once

ENV_TEMPORAL_ADDRESS = "CRASHLAB_TEMPORAL_ADDRESS"
NAMESPACE_FILE = "temporal-namespace"
HOW_TO_START = ("start one in Python with `crashlab.engines.temporal.TemporalServer.start(STATE_DIR)` and put "
                "`server.env()` in the agent's environment")


def temporal_address() -> str:
    address = os.environ.get(ENV_TEMPORAL_ADDRESS)
    if not address:
        raise TemporalUnavailable(f"{ENV_TEMPORAL_ADDRESS} is not set, so there is no Temporal server to talk to; "
                                  f"{HOW_TO_START}")
    return address


class TemporalUnavailable(AgentError):
    """The Temporal server cannot be reached. An agent prints this as one line and exits 2."""


def connect_error(exc: BaseException) -> str:
    """Why a connection failed, in words: the SDK's error is a nested Rust debug string
    (``ConnectError("tcp connect error", Os { code: 111, ... })``) that means "connection refused"."""
    said = " ".join(str(exc).split())
    if "ConnectionRefused" in said or "Connection refused" in said:
        return "connection refused: nothing listens there"
    return cut_at_word(said, 300) or "timed out"


def namespace_for(state_dir: str | os.PathLike, timeout: float = 10.0) -> str:
    """The Temporal namespace of one world: chosen on first use and remembered in the world's agent
    state directory, so a resumed process finds the same one, and a fresh world gets a fresh one. Agents
    that start together on a fresh world all ask at once: :func:`crashlab.plumbing.chosen_once.chosen_once`."""
    return chosen_once(Path(state_dir) / NAMESPACE_FILE,
                       # a name for a new world, not a key for a repeated effect
                       lambda: f"crashlab-{uuid.uuid4().hex[:12]}\n", lambda text: text.strip() or None,
                       timeout=timeout,
                       held_too_long=lambda lock: TemporalUnavailable(
                           f"another process has held {lock} for {timeout:.0f} s while choosing this world's "
                           "Temporal namespace"))


def use_quiet_runtime() -> None:
    """Make this process's Temporal runtime log only errors. By default its core logs a WARN line for
    every failing workflow task straight to the process's stderr; the course reports those itself."""
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    quiet = TelemetryConfig(logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR")))
    Runtime.set_default(Runtime(telemetry=quiet), error_if_already_set=False)


_quiet = False


async def connect(namespace: str | None = None, *, address: str | None = None, timeout: float = 10.0):
    """A ``temporalio`` client for this world's namespace (created if needed), or :class:`TemporalUnavailable`
    within ``timeout`` seconds if the server is down."""
    from temporalio.client import Client
    from temporalio.service import RPCError, RPCStatusCode

    global _quiet
    if not _quiet:
        use_quiet_runtime()
        _quiet = True
    address = address or temporal_address()
    if namespace is None:
        namespace = namespace_for(state_dir())
    try:
        client = await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout)
    except (asyncio.TimeoutError, RuntimeError, RPCError) as exc:
        raise TemporalUnavailable(f"cannot reach the Temporal server at {address} ({connect_error(exc)}); is it "
                                  f"running? {HOW_TO_START}") from None
    if namespace != "default":
        from google.protobuf.duration_pb2 import Duration
        from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest

        try:
            await client.workflow_service.register_namespace(
                RegisterNamespaceRequest(namespace=namespace,
                                         workflow_execution_retention_period=Duration(seconds=86400)),
                timeout=__import__("datetime").timedelta(seconds=timeout))
        except RPCError as exc:
            if exc.status != RPCStatusCode.ALREADY_EXISTS:
                raise TemporalUnavailable(f"could not create the namespace {namespace} on {address}: {exc}") from None
    return client


__all__ = ["ENV_TEMPORAL_ADDRESS", "HOW_TO_START", "NAMESPACE_FILE", "TemporalUnavailable", "connect", "namespace_for",
           "temporal_address", "use_quiet_runtime"]
