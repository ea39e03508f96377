"""DBOS: it runs inside the agent's own process, its system database a SQLite file (or PostgreSQL) the agent names;
here, what it records read back (:mod:`.record`), its benchmark rows (:mod:`.bench`), and its entry in the engine
registry, :data:`ENGINE`."""

from crashlab.engines.dbos.bench import DbosWorkloads, PydanticAIDbosWorkloads
from crashlab.engines.dbos.record import SystemDatabaseReader
from crashlab.engines.engine import Engine, Integration
from crashlab.engines.postgres import ENV_POSTGRES_URL

ENGINE = Engine(
    "dbos", "DBOS", "#55a868", packages=("dbos",), imports=("dbos",), env=(ENV_POSTGRES_URL,),
    bench=("dbos-sqlite", "dbos-postgres"), workload=DbosWorkloads(),
    records=SystemDatabaseReader.what, record=SystemDatabaseReader(),
    integrations=(Integration("dbos+pydantic-ai", "Pydantic AI on DBOS", "dbos-sqlite", ("pydantic-ai-slim",),
                              ("pydantic_ai", "pydantic_ai.durable_exec.dbos"), PydanticAIDbosWorkloads()),),
    long_bench="dbos-sqlite")

__all__ = ["ENGINE"]
