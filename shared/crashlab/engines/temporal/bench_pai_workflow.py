"""The Temporal workflow of the benchmark's Pydantic AI row (``temporal+pydantic-ai``): the benchmark's agent
(:mod:`crashlab.engines.pai_bench`) run inside a workflow, with ``TemporalDurability``, the capability that
makes each model request and each tool call an activity. It lives in a real module for the same reason as
:mod:`crashlab.engines.temporal.bench_workflow`: Temporal's sandbox re-imports the module that defines a workflow.

The activities get the bare row's retry policy and the start-to-close timeout of its recovery scene, so the two
rows recover alike; the steps are trivial, so the short timeout never cuts a measurement short."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from crashlab.engines.temporal.bench_workflow import RECOVERY_TIMEOUT_S, RETRY

with workflow.unsafe.imports_passed_through():  # built once, outside the sandbox
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability

    from crashlab.engines.pai_bench import build_agent, prompt, steps_done

_ACTIVITY: workflow.ActivityConfig = {"start_to_close_timeout": timedelta(seconds=RECOVERY_TIMEOUT_S), "retry_policy": RETRY}
agent = build_agent(capabilities=[TemporalDurability(activity_config=_ACTIVITY, model_activity_config=_ACTIVITY)])


@workflow.defn(name="PydanticAIBenchWorkflow")
class PydanticAIBenchWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]  # the plugin registers their activities on the worker

    @workflow.run
    async def run(self, args: dict) -> int:
        """Run the agent for ``args["steps"]`` steps; return how many completed."""
        result = await agent.run(prompt(args["steps"]))
        return steps_done(result.output)


__all__ = ["PydanticAIBenchWorkflow", "agent"]
