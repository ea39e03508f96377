"""LangGraph: it runs inside the agent's own process, its checkpoints in a SQLite file (or PostgreSQL) the agent
names; here, what it checkpoints read back (:mod:`.record`), its benchmark rows (:mod:`.bench`), and its entry in
the engine registry, :data:`ENGINE`."""

from crashlab.engines.engine import Engine, Integration
from crashlab.engines.langgraph.bench import FunctionalWorkloads, LangGraphWorkloads
from crashlab.engines.langgraph.record import CheckpointReader
from crashlab.engines.postgres import ENV_POSTGRES_URL

# Seconds each checkpoint write is held back in an agent run, as on a loaded machine's disk (crashlab.agent.slow_disk,
# which a launcher preloads for a lesson's world or a check's).
ENV_SLOW_CHECKPOINTS = "CRASHLAB_SLOW_CHECKPOINTS_S"

ENGINE = Engine(
    "langgraph", "LangGraph", "#4c72b0", packages=("langgraph", "langgraph-checkpoint-sqlite"),
    imports=("langgraph.graph", "langgraph.checkpoint.sqlite"), env=(ENV_POSTGRES_URL, ENV_SLOW_CHECKPOINTS),
    bench=("langgraph-exit", "langgraph-async", "langgraph-sync"), workload=LangGraphWorkloads(),
    records=CheckpointReader.what, record=CheckpointReader(),
    integrations=(Integration("langgraph-functional", "LangGraph's functional API", "langgraph-sync", (),
                              ("langgraph.func",), FunctionalWorkloads()),),
    long_bench="langgraph-sync")

__all__ = ["ENGINE", "ENV_SLOW_CHECKPOINTS"]
