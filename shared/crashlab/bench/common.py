"""What every part of the benchmark shares: the engine names (the rows a run measures by default, and the
frameworks' integrations it measures when asked), the environment variables through which the
caller's process tells a child what to do, the point where every engine's step stops dead in the process the
recovery scene kills (:func:`reached_block_point`), the Temporal
recovery scene's activity timeout (used by the workload and by the note that explains the figure), and
:class:`BenchError`, the one exception that becomes a row's note instead of a traceback."""

import os
import time
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.engines.registry import ENGINES as _REGISTRY
from crashlab.engines.registry import INTEGRATIONS
from crashlab.engines.restate.client import ENV_RESTATE_ADMIN, ENV_RESTATE_INGRESS
from crashlab.engines.temporal.client import ENV_TEMPORAL_ADDRESS as ENV_TEMPORAL

# The fsync floor first, then every engine's variants in the registry's order.
ENGINES = ("floor", *(variant for entry in _REGISTRY.values() for variant in entry.bench))
# Every row a run can measure: the engines' own, then the frameworks' integrations (asked for by name, each
# measured beside its engine's row: ``run_benchmark(engines=["temporal", "temporal+pydantic-ai"])``).
VARIANTS = (*ENGINES, *INTEGRATIONS)
ENV_BLOCK_AT = "CRASHLAB_BENCH_BLOCK_AT"   # the step (1-based) at which to block, in the killed process only
ENV_MARKER = "CRASHLAB_BENCH_MARKER"       # the file to create when that step is reached
ENV_DB_URL = "CRASHLAB_BENCH_DB_URL"
TEMPORAL_RECOVERY_TIMEOUT_S = 2           # start-to-close of the activities in the Temporal recovery scene


def reached_block_point(i: int) -> bool:
    """Whether step ``i`` (0-based) is where this process is to stop dead and wait for its SIGKILL: only in
    the process the recovery scene kills, told so through its environment (never through the workflow's
    arguments, which the recovering process replays). Leaves the marker the parent waits for first."""
    block_at = os.environ.get(ENV_BLOCK_AT)
    if not block_at or i + 1 != int(block_at):
        return False
    marker = os.environ.get(ENV_MARKER)
    if marker:
        Path(marker).write_text(f"{os.getpid()} {time.time()}\n")
    return True


class BenchError(CrashlabError, RuntimeError):
    """One engine's measurement could not be made; the message becomes that row's note."""


__all__ = ["ENGINES", "INTEGRATIONS", "VARIANTS", "reached_block_point", "ENV_BLOCK_AT", "ENV_MARKER", "ENV_DB_URL", "ENV_TEMPORAL",
           "ENV_RESTATE_INGRESS", "ENV_RESTATE_ADMIN", "TEMPORAL_RECOVERY_TIMEOUT_S",
           "BenchError"]
