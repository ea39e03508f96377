"""What durability costs: each engine's overhead per durable step, as a multiple of an fsync floor measured
in the same run, and the time it takes a new process to finish a workflow after a SIGKILL.

    from crashlab.bench import run_benchmark
    result = run_benchmark(steps=50, repeats=3)   # a minute or two; quick: steps=20, repeats=1
    print(result.table())
    result.plot()

    python -m crashlab.bench [--quick] [--engines floor,dbos-sqlite] [--json OUT] [--plot PNG]
    python -m crashlab.bench --engine dbos-sqlite --steps 50 [--json OUT]   # one engine, in this process:
                                                                            # its raw samples only

Every step is trivial (no model, no HTTP): the figure is the engine's own cost of making one step durable.

**Engines.** ``floor`` appends one JSON line to a file and fsyncs it, per step: the least a durable log
can do. ``langgraph-exit`` / ``-async`` / ``-sync``: a graph that loops through one trivial node, on
``SqliteSaver``, invoked with ``durability=`` that mode. ``dbos-sqlite``: a ``@DBOS.workflow`` calling a
trivial ``@DBOS.step`` N times, system database in a SQLite file. ``dbos-postgres``: the same on a
throwaway PostgreSQL cluster (:mod:`crashlab.engines.postgres`; that cluster runs with ``fsync=off``, so its
figure leaves out the disk flush). ``temporal``: a workflow running N trivial activities, worker in the
measuring process, on the dev server (:mod:`crashlab.engines.temporal`, SQLite file). ``restate``: a service
handler running N trivial ``ctx.run`` steps (each a journal entry the server records before the handler goes
on), its endpoint served by the measuring process, on one Restate server per run (:mod:`crashlab.engines.restate`,
:mod:`crashlab.engines.restate.bench`). An engine that cannot run here is still a row, with the reason in
``note``.

**Frameworks' integrations** (each engine's ``integrations`` in the registry, measured only when named, each right
after its engine's own row, which is added if not named): ``temporal+pydantic-ai``, ``dbos+pydantic-ai`` and
``restate+pydantic-ai`` run a Pydantic AI agent (:mod:`crashlab.engines.pai_bench`) whose steps are calls of
one trivial tool, asked for one per reply by a local ``FunctionModel``, on Temporal (``TemporalDurability``: a
model-request activity and a tool activity per step), on DBOS (``DBOSDurability``, the tool wrapped in
``@DBOS.step``: two steps per step) and on Restate (``RestateAgent`` with ``auto_wrap_tools=True``: two journal
entries per step); ``langgraph-functional`` is an ``@entrypoint`` calling one ``@task`` per step under
``durability="sync"``, beside ``langgraph-sync``. Each such row's note gives its per-step cost as a multiple of
its engine's row from the same run:

    run_benchmark(engines=["temporal", "temporal+pydantic-ai", "dbos-sqlite", "dbos+pydantic-ai"])

**Per-step cost.** Each engine is measured in its own new process (DBOS and Temporal keep global state).
That process runs one untimed warm-up workflow, then, ``repeats`` times, an N-step workflow and three
1-step ones around it; one sample is ``(t_N - median t_1) / (N - 1)``, so start-up and per-workflow costs
cancel out. The row holds the
median sample; ``ratio_to_floor`` divides it by the floor's median from the same run.

**Recovery.** A child process starts a workflow of ``steps`` steps that stops dead in step
``steps // 2 + 1``; the parent SIGKILLs it there, then starts a new process that finishes the workflow
(LangGraph: ``invoke(None)`` on the same thread, or from the start if no checkpoint was written; DBOS:
``DBOS.launch()`` with the same pinned application version; Temporal: a new worker, the dead worker's
sticky queue given up after 1 s and the activity's start-to-close timeout 2 s, as lesson 5 tunes it; Restate:
a new endpoint on the dead one's address, the invocation sent again under the same idempotency key and retried
at once through the admin API, as the lesson's agent does). ``recovery_s`` runs from the
moment that process is spawned until it holds the workflow's result, Python start-up and imports
included; ``recovery_startup_s`` is the start-up part; ``recovery_steps_run`` counts the steps the new
process executed (ideally ``steps - steps // 2``: the interrupted step again and the rest).

**The length axis** (``lengths=[10, 30, 100]``, ``--lengths``; :mod:`crashlab.bench.lengths`): each engine's long
agent, on the row its registry entry names ``long_bench``, run to each length with a result of ``result_bytes`` per
turn and SIGKILLed in its last turn; the new process that finishes it reads the engine's own record. Each
:class:`~crashlab.bench.lengths.LongRow` holds the bytes stored after each length, the recovery time at each, and
the growth exponent over the longest run, printed in a second table beside the per-step costs.

**JSON** (``BenchResult.as_dict()``, ``--json``): ``steps``, ``repeats``, ``engines``, ``floor_ms``,
``recovery`` (bool), ``recovery_steps``, ``recovery_kill_at``, ``rows``, ``machine`` (``python``,
``platform``, ``cpus``, ``workdir_fs``), ``versions``, ``started`` (UTC), ``elapsed_s``, ``lengths``,
``result_bytes``, ``long_rows`` (each: ``engine``, ``bytes_at``, ``bytes_per_turn`` and ``recovery_s`` keyed by
length, ``exponent``, ``note``). Each row:
``engine``, ``per_step_ms``, ``ratio_to_floor``, ``recovery_s``, ``recovery_startup_s``,
``recovery_steps_run``, ``samples_ms``, ``note`` (``None`` where not measured).

Times are wall-clock on a shared machine: absolute figures move from run to run, the ratios much less.
It is a benchmark, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

from crashlab.bench.common import BenchError, engine_rows
from crashlab.bench.results import BenchResult, BenchRow
from crashlab.bench.lengths import LongRow
from crashlab.bench.run import run_benchmark, run_long_agents

# The package's parts (each module says what it holds): common (the rows and their workloads, read from the engine
# registry), results (BenchRow, BenchResult: table, plots, JSON), floor (the fsync floor's workload; each engine's
# is in its folder, crashlab.engines.<name>.bench), child (a row's own process: measurement, recovery phase,
# watchdog), measure (the per-step measurement in it), lengths (the length axis), spawn (running the children and servers from the caller's
# process), run (run_benchmark); its command line is crashlab.cli.bench.

__all__ = ["run_benchmark", "run_long_agents", "BenchResult", "BenchRow", "BenchError", "LongRow", "engine_rows"]
