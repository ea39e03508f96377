"""The Temporal workflow and activity that :mod:`crashlab.bench` measures: N trivial steps, one activity each.

They live in a real module because Temporal's workflow sandbox re-imports the module that defines a
workflow, and refuses one defined in ``__main__`` or in a notebook cell.

The activity does nothing but return its argument plus one -- unless the benchmark's recovery scene
asks it to stop dead at one step (``CRASHLAB_BENCH_BLOCK_AT``), so that the process can be SIGKILLed
mid-step. That switch is read from the environment of the worker process, never from the workflow's
arguments: the arguments are in the history, and the recovering worker must not block again.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from crashlab.engines.workload import long_step, reached_block_point

RECOVERY_TIMEOUT_S = 2  # start-to-close of the activities in the recovery scene (and in the note that explains it)
# Retry soon after a crash (the default first back-off is 1 s), as lesson 5's tuned profile does.
RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2,
                    maximum_interval=timedelta(seconds=2))

executed = 0  # how many step activities ran in this process (the recovery scene reports it)


@activity.defn(name="bench_step")
async def bench_step(i: int) -> int:
    """The step of every engine (:func:`crashlab.engines.workload.step_body`), as an activity."""
    global executed
    executed += 1
    while reached_block_point(i):  # wait here for the SIGKILL
        await activity_sleep(3600)
    return i + 1


@activity.defn(name="bench_long_step")
async def bench_long_step(args: dict) -> str:
    """A turn of the long agent (:func:`crashlab.engines.workload.long_step`), as an activity: its input, the whole
    conversation so far, is in the history with every turn, as a model activity's input is."""
    global executed
    executed += 1
    if reached_block_point(args["i"]):  # wait here for the SIGKILL
        await activity_sleep(3600)
    return long_step(args["i"], args["conversation"], args["result_bytes"])


async def activity_sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


@workflow.defn(name="BenchWorkflow")
class BenchWorkflow:
    @workflow.run
    async def run(self, args: dict) -> int:
        """Run ``args["steps"]`` activities one after another; return how many completed."""
        timeout = timedelta(seconds=args.get("start_to_close_s", 10))
        i = 0
        for _ in range(args["steps"]):
            i = await workflow.execute_activity(bench_step, i, start_to_close_timeout=timeout, retry_policy=RETRY)
        return i


@workflow.defn(name="BenchLongWorkflow")
class BenchLongWorkflow:
    @workflow.run
    async def run(self, args: dict) -> int:
        """The long agent: ``args["steps"]`` turns, each an activity handed the conversation so far; return how many."""
        timeout = timedelta(seconds=args.get("start_to_close_s", 10))
        conversation: list[str] = []
        for i in range(args["steps"]):
            conversation.append(await workflow.execute_activity(
                bench_long_step, {"i": i, "conversation": conversation, "result_bytes": args["result_bytes"]},
                start_to_close_timeout=timeout, retry_policy=RETRY))
        return len(conversation)


def worker_options(cache: bool = True, sticky_s: float | None = None) -> dict:
    """Keyword arguments for a ``Worker`` of :class:`BenchWorkflow`: ``cache=False`` is
    ``max_cached_workflows=0``; ``sticky_s`` is how long a task waits on a (dead) worker's sticky queue."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    # The sandbox re-imports a workflow's module with its package; crashlab's __init__ pulls in the
    # world server, whose imports the sandbox restricts. Pass the package through: only the workflow
    # class runs sandboxed, as it would from a top-level module file.
    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("crashlab"))
    options: dict[str, Any] = {"workflow_runner": runner}
    if not cache:
        options["max_cached_workflows"] = 0
    if sticky_s is not None:
        options["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=sticky_s)
    return options


async def seconds_per_step(client, steps: int, *, cache: bool = True) -> float:
    """Run one :class:`BenchWorkflow` of ``steps`` activities on a worker in the calling event loop (a
    notebook's, say) and return the wall time per step. ``cache=False`` is ``max_cached_workflows=0``:
    the worker keeps no workflow in memory, so every workflow task replays the whole history so far."""
    import uuid

    from temporalio.worker import Worker

    queue = f"replay-cost-{uuid.uuid4().hex[:8]}"  # a queue of this measurement's own, so no other worker takes it
    async with Worker(client, task_queue=queue, workflows=[BenchWorkflow], activities=[bench_step],
                      **worker_options(cache)):
        started = time.perf_counter()
        done = await client.execute_workflow(BenchWorkflow.run, {"steps": steps}, id=queue, task_queue=queue)
        elapsed = time.perf_counter() - started
    if done != steps:
        raise RuntimeError(f"the workflow returned {done}, not {steps}")
    return elapsed / steps


__all__ = ["RECOVERY_TIMEOUT_S", "RETRY", "BenchLongWorkflow", "BenchWorkflow", "bench_long_step", "bench_step", "seconds_per_step", "worker_options"]
