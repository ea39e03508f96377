"""What every part of the benchmark shares: the engine names, the environment variables through which the
caller's process tells a child what to do (same names as in :mod:`crashlab.bench_temporal`), the Temporal
recovery scene's activity timeout (used by the workload and by the note that explains the figure), and
:class:`BenchError`, the one exception that becomes a row's note instead of a traceback."""

ENGINES = ("floor", "langgraph-exit", "langgraph-async", "langgraph-sync", "dbos-sqlite", "dbos-postgres",
           "temporal")
ENV_BLOCK_AT = "CRASHLAB_BENCH_BLOCK_AT"   # same names as in crashlab.bench_temporal
ENV_MARKER = "CRASHLAB_BENCH_MARKER"
ENV_DB_URL = "CRASHLAB_BENCH_DB_URL"
ENV_TEMPORAL = "CRASHLAB_BENCH_TEMPORAL_ADDRESS"
TEMPORAL_RECOVERY_TIMEOUT_S = 2           # start-to-close of the activities in the Temporal recovery scene


class BenchError(RuntimeError):
    """One engine's measurement could not be made; the message becomes that row's note."""


__all__ = ["ENGINES", "ENV_BLOCK_AT", "ENV_MARKER", "ENV_DB_URL", "ENV_TEMPORAL", "TEMPORAL_RECOVERY_TIMEOUT_S",
           "BenchError"]
