"""Temporal: the dev server (:mod:`.server`), what an agent uses to reach it (:mod:`.client`), and the replay
check lesson 5 runs on a saved history (:mod:`.replay`)."""

from crashlab.engines.temporal.client import (ENV_TEMPORAL_ADDRESS, NAMESPACE_FILE, TemporalUnavailable, connect,
                                              namespace_for, temporal_address, use_quiet_runtime)
from crashlab.engines.temporal.server import (ENV_TEMPORAL_BIN, TemporalServer, TemporalServerError, temporal_binary,
                                              temporal_environment)

__all__ = ["ENV_TEMPORAL_ADDRESS", "ENV_TEMPORAL_BIN", "NAMESPACE_FILE", "TemporalServer", "TemporalServerError",
           "TemporalUnavailable", "connect", "namespace_for", "temporal_address", "temporal_binary",
           "temporal_environment", "use_quiet_runtime"]
