"""A durable agent for the long task (a test's, not a lesson's): it logs each model answer before acting on it and
each tool result after, keys every tool call by its order and tool, and -- with CRASHLAB_TEST_COMPACT=K -- compacts
its conversation every K tool turns: it asks the model for a summary (no tools offered), logs it, and carries on
with the task and the progress line alone. A resume replays the log, so it asks the model nothing it was answered."""

import json
import os

from crashlab.agent import (MAX_TOKENS, MODEL, SUMMARY_ASK, TOOLS, agent_main, backlog_turns, call_tool,
                            content_to_dicts, first_tool_use, model_client, state_dir, task_for, tool_result_message)


def read_log(path):
    events = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:  # a line torn by the kill: never acted on
                break
    return events


def append(path, event):
    with open(path, "a") as f:
        f.write(json.dumps(event) + "\n")
        f.flush()
        os.fsync(f.fileno())


def run(order_id):
    period = int(os.environ.get("CRASHLAB_TEST_COMPACT", "0"))
    path = state_dir() / f"{order_id}.log"
    task = task_for(order_id)
    messages, turns = [{"role": "user", "content": task}], 0
    for event in read_log(path):
        if event["kind"] == "assistant":
            messages.append({"role": "assistant", "content": event["content"]})
        elif event["kind"] == "result":
            messages.append(event["message"])
            turns += 1
        else:  # a summary: the conversation starts again from the task and the progress it reports
            messages = [{"role": "user", "content": f"{task}\n\n{event['text']}"}]
    client = model_client()
    while True:
        if messages[-1]["role"] == "assistant":  # answered and logged, then killed: act on it now
            block = first_tool_use(messages[-1]["content"])
            if block is None:
                print(messages[-1]["content"][0]["text"])
                return
            key = f"{block['input']['order_id']}/{block['name']}"
            result = tool_result_message(block["id"], call_tool(block["name"], block["input"], idempotency_key=key))
            append(path, {"kind": "result", "message": result})
            messages.append(result)
            turns += 1
            continue
        after_result = isinstance(messages[-1]["content"], list)  # not a conversation just compacted
        if period and after_result and turns % period == 0 and 0 < turns < backlog_turns(order_id):
            last = {"role": "user", "content": messages[-1]["content"] + [{"type": "text", "text": SUMMARY_ASK}]}
            reply = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, messages=messages[:-1] + [last])
            text = reply.content[0].text
            append(path, {"kind": "summary", "text": text})
            messages = [{"role": "user", "content": f"{task}\n\n{text}"}]
            continue
        reply = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        assistant = content_to_dicts(reply.content)
        append(path, {"kind": "assistant", "content": assistant})
        messages.append({"role": "assistant", "content": assistant})


if __name__ == "__main__":
    agent_main(run)
