"""The endpoints the Restate benchmark rows serve (:mod:`.bench`): a service whose handler runs N trivial
``ctx.run`` steps, and Pydantic AI's ``RestateAgent`` running the benchmark's agent (:mod:`crashlab.engines.pai_bench`)
inside a handler. Apart from :mod:`.bench` because the SDK reads a handler's annotations in its module's namespace,
so ``restate`` is imported at the top here, in the row's child process only."""

from datetime import timedelta
from typing import Any

import restate  # at the top: the SDK reads the handler's annotations in this module's namespace
from restate import InvocationRetryPolicy, RunOptions

from crashlab.engines import pai_bench
from crashlab.engines.workload import long_step, step_body

STEP: RunOptions = RunOptions(max_attempts=None, initial_retry_interval=timedelta(milliseconds=100),
                  max_retry_interval=timedelta(milliseconds=500))  # the retries of the bare row's invocation


def bench_service(name: str, kind: type = restate.Service) -> Any:
    """A service of the benchmark's (or a virtual object: ``kind``), with the retries and timeouts the lesson's agent
    asks for: a dead endpoint's invocation is retried soon and for long."""
    retry = InvocationRetryPolicy(initial_interval=timedelta(milliseconds=100), exponentiation_factor=2.0,
                                  max_interval=timedelta(milliseconds=500), max_attempts=2000, on_max_attempts="pause")
    return kind(name, invocation_retry_policy=retry, inactivity_timeout=timedelta(seconds=30),
                abort_timeout=timedelta(seconds=5))


def long_object_name(service: str) -> str:
    """The long agent's virtual object beside the bench service ``service``: named as the lesson's order objects are
    (``Order_``...), so that the engine's record reader reads its journal as it reads an order's."""
    return f"Order_{service}"


def bench_app(name: str):
    """The bench service: ``run(n)`` runs n journaled steps and returns how many completed."""
    service = bench_service(name)

    def step(i: int) -> int:  # a plain function: the SDK runs it in a thread, so a blocked step blocks no one else
        return step_body(i)

    @service.handler()
    async def run(ctx: restate.Context, n: int) -> int:
        i = 0
        for k in range(n):
            i = await ctx.run_typed(f"step#{k + 1}", step, i=i)
        return i

    long = bench_service(long_object_name(name), restate.VirtualObject)

    @long.handler("run")
    async def run_long(ctx: restate.ObjectContext, args: dict) -> int:
        """The long agent, keyed by its workflow id: n turns, each a ``ctx.run`` whose result the journal keeps (its
        closure's conversation is not journaled)."""
        conversation: list[str] = []
        for i in range(args["n"]):
            conversation.append(await ctx.run_typed(f"turn#{i + 1}", long_step, i=i, conversation=conversation,
                                                    result_bytes=args["result_bytes"]))
        return len(conversation)

    return restate.app(services=[service, long])


def pydantic_ai_app(name: str):
    """The service ``name`` whose handler ``run(n)`` runs the benchmark's agent for n steps through ``RestateAgent``."""
    from restate.ext.pydantic import RestateAgent

    agent = RestateAgent(pai_bench.build_agent(), auto_wrap_tools=True, run_options=STEP)
    bench = bench_service(name)

    @bench.handler()
    async def run(ctx: restate.Context, n: int) -> int:
        result = await agent.run(pai_bench.prompt(n))
        return pai_bench.steps_done(result.output)

    return restate.app(services=[bench])


__all__ = ["STEP", "bench_app", "bench_service", "long_object_name", "pydantic_ai_app"]
