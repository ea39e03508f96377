"""Restate: the server (:mod:`.server`, and :mod:`.fetch`, which installs its binary without npm), what an agent
uses to reach it and to host the endpoint it pushes to (:mod:`.client`), its journal read back (:mod:`.record`), its
benchmark rows (:mod:`.bench`, with the endpoints they serve) -- and its entry in the engine registry,
:data:`ENGINE`. The client's and the server's names are imported on first use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crashlab.engines.engine import Engine, Integration, Server
from crashlab.engines.restate.bench import PydanticAIRestateWorkloads, RestateWorkloads
from crashlab.engines.restate.record import JournalReader
from crashlab.errors import ServerError
from crashlab.plumbing.lazy import lazy_exports

ENV_RESTATE_INGRESS = "CRASHLAB_RESTATE_INGRESS"
ENV_RESTATE_ADMIN = "CRASHLAB_RESTATE_ADMIN"
ENV_RESTATE_BIN = "CRASHLAB_RESTATE_BIN"
# @restatedev/restate-server, an npm package: the one pin, which the Makefiles and postBuild read too (a test checks)
RESTATE_VERSION = (Path(__file__).parent / "SERVER_VERSION").read_text().strip()


class RestateServerError(ServerError):
    """The server could not be found, started, reached or stopped. The message says what to do."""


def _serve(folder: Path, timeout: float):
    from crashlab.engines.restate.server import serve

    return serve(folder, timeout)


def _version() -> str | None:
    from crashlab.engines.restate.server import binary_version

    return binary_version()


ENGINE = Engine(
    "restate", "Restate", "#dd8452", packages=("restate-sdk",), imports=("restate", "hypercorn.asyncio", "httpx"),
    env=(ENV_RESTATE_INGRESS, ENV_RESTATE_ADMIN), bench=("restate",), workload=RestateWorkloads(),
    records=JournalReader.what, record=JournalReader(),
    server=Server(_serve, ENV_RESTATE_BIN, RestateServerError, _version, RESTATE_VERSION),
    integrations=(Integration("restate+pydantic-ai", "Pydantic AI on Restate", "restate", ("pydantic-ai-slim",),
                              ("pydantic_ai", "restate.ext.pydantic"), PydanticAIRestateWorkloads()),),
    long_bench="restate")

if TYPE_CHECKING:
    from crashlab.engines.restate.client import (RestateUnavailable, admin_sql, attach, call_handler, endpoint_for,
                                                 invocation_row, journal_names, port_taken, register_deployment,
                                                 resolve_awakeable, restate_urls, serve_endpoint, stuck_reason)
    from crashlab.engines.restate.server import RestateServer, restate_binary, restate_environment

__getattr__, __dir__ = lazy_exports(globals())
__all__ = ["ENGINE", "ENV_RESTATE_ADMIN", "ENV_RESTATE_BIN", "ENV_RESTATE_INGRESS", "RESTATE_VERSION", "RestateServer",
           "RestateServerError", "RestateUnavailable", "admin_sql", "attach", "call_handler", "endpoint_for",
           "invocation_row", "journal_names", "port_taken", "register_deployment", "resolve_awakeable",
           "restate_binary", "restate_environment", "restate_urls", "serve_endpoint", "stuck_reason"]
