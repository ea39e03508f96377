"""The durable-execution engines the course runs: their servers, their clients, PostgreSQL, and the registry
that says, for each engine, what the rest of the course needs to know (:mod:`.registry`)."""
