import json, os
from crashlab.agent import MODEL, MAX_TOKENS, TOOLS, agent_main, call_tool, content_to_dicts, first_tool_use, model_client, order_task, state_dir, tool_result_message

def run(order_id):
    path = state_dir() / f"{order_id}.jsonl"
    messages = [{"role": "user", "content": order_task(order_id)}]
    if path.exists():
        for line in path.read_text().splitlines():
            e = json.loads(line)
            messages += [{"role": "assistant", "content": e["assistant"]}, e["result"]]
    client = model_client()
    for _ in range(10):
        reply = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        if reply.stop_reason != "tool_use":
            print(reply.content[0].text); return
        block = first_tool_use(reply.content)
        result = call_tool(block["name"], block["input"])
        assistant = content_to_dicts(reply.content)
        res = tool_result_message(block["id"], result)
        messages += [{"role": "assistant", "content": assistant}, res]
        with open(path, "a") as f:
            f.write(json.dumps({"assistant": assistant, "result": res}) + "\n"); f.flush(); os.fsync(f.fileno())

if __name__ == "__main__":
    agent_main(run)
