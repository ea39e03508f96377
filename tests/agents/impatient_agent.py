"""A fixture agent with an impatient model client: it gives up on a model call after 1 s and asks again, as an
engine's attempt timeout does, so a world that stalls answers -- and bills -- every attempt it was sent. Tools are
keyed by the order and the step; a finished order is left alone."""

import os
import time

import anthropic

from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, agent_main, call_tool, content_to_dicts, first_tool_use,
                            order_task, state_dir, tool_result_message)
from crashlab.envnames import ENV_MODEL_URL


def ask(messages: list[dict]):
    client = anthropic.Anthropic(base_url=os.environ[ENV_MODEL_URL], api_key="offline", max_retries=0, timeout=1.0)
    while True:
        try:
            return client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        except (anthropic.APITimeoutError, anthropic.APIConnectionError):
            time.sleep(0.2)


def run(order_id: str) -> None:
    done = state_dir() / f"{order_id}.done"
    if done.exists():
        return
    messages = [{"role": "user", "content": order_task(order_id)}]
    for step in range(1, 10):
        content = content_to_dicts(ask(messages).content)
        messages.append({"role": "assistant", "content": content})
        call = first_tool_use(content)
        if call is None:
            done.write_text("done\n")
            return
        result = call_tool(call["name"], call["input"], idempotency_key=f"{order_id}:{step}")
        messages.append(tool_result_message(call["id"], result))


if __name__ == "__main__":
    agent_main(run)
