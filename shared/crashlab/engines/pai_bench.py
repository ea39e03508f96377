"""The benchmark's Pydantic AI agent, which the Temporal, DBOS and Restate integration rows run each their own
way: one tool, ``step``, which does the trivial step every engine's row does (:func:`~crashlab.engines.workload.step_body`), and a
local model (a ``FunctionModel``, in this process: no HTTP, no tokens) that asks for the tool N times, one call
per reply, handing each call the last result, then answers with the count. So one durable step here is what a
step of an agent is -- a model request and then a tool call -- and the row's figure is what the integration
makes durable for it; N comes from the prompt, so a recovering process's model carries on where the run was.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from crashlab.engines.workload import missing, step_body

AGENT_NAME = "bench_agent"  # Temporal and DBOS name their activities and steps after it
PRELOAD = ("pydantic_ai.models.function",)


def prompt(n: int) -> str:
    """The task a run of n steps starts with; the model reads n back from it."""
    return f"run the step tool steps={n} times, passing on each result"


def _script(messages: list[Any], info: Any) -> Any:
    """The model's one rule: ask for ``step`` with the last result until n results came back, then say n."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    parts = [part for message in messages for part in message.parts]
    asked = next(p.content for p in parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))
    found = re.search(r"steps=(\d+)", asked)
    if found is None:
        raise ValueError(f"the benchmark's prompt names no number of steps: {asked!r}")
    n = int(found.group(1))
    results = [p.content for p in parts if isinstance(p, ToolReturnPart) and p.tool_name == "step"]
    last = int(str(results[-1])) if results else 0
    if len(results) < n:
        return ModelResponse(parts=[ToolCallPart("step", {"i": last})])
    return ModelResponse(parts=[TextPart(str(last))])


def build_agent(capabilities: Sequence = (), tool_step: Callable | None = None):
    """The agent; ``capabilities`` is where an engine's durability goes (``TemporalDurability()``), ``tool_step`` a
    decorator the tool's work goes through, for an engine whose integration leaves function tools alone
    (``DBOS.step()``)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    agent = Agent(FunctionModel(_script, model_name="bench-script"), name=AGENT_NAME, capabilities=list(capabilities))
    work = tool_step(step_body) if tool_step is not None else step_body

    @agent.tool_plain
    def step(i: int) -> int:
        """Run one trivial step and return its result."""
        return work(i)

    return agent


def steps_done(output: str) -> int:
    """How many steps the run reports (the model's last answer)."""
    return int(output)


def unavailable() -> str | None:
    return missing("pydantic_ai")


__all__ = ["AGENT_NAME", "PRELOAD", "build_agent", "prompt", "steps_done", "unavailable"]
