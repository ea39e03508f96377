"""A fixture agent that streams every model call and relays its text to the user's screen, on lesson 1's log (each
decision logged before its tool runs, each result after; tools keyed by order and step).

``STREAM_RELAY=naive``: each text delta shown as it arrives, with no identity -- a resumed run shows again what the
killed one had shown. ``STREAM_RELAY=offset``: each shown with (turn, chunk, attempt) -- the turn read from the log,
the attempt the reply's message id -- and a turn the screen shows from another attempt withdrawn first."""

import os

from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, agent_main, append_event, call_tool, content_to_dicts,
                            first_tool_use, model_client, order_task, retract, screen_cursor, show, state_dir,
                            tool_result_message)
from crashlab.answers.lesson01 import read_order_log, rebuild

RELAY = os.environ.get("STREAM_RELAY", "naive")


def streamed_reply(order_id: str, messages: list[dict]) -> dict:
    turn = sum(message["role"] == "assistant" for message in messages) + 1  # from the log, never a counter
    attempt, chunk = None, 0
    with model_client().messages.stream(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages) as stream:
        for event in stream:
            if event.type == "message_start":
                attempt = event.message.id
                if RELAY == "offset" and screen_cursor(order_id)["attempts"].get(str(turn)) not in (None, attempt):
                    retract(order_id, turn)
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                identity = {"turn": turn, "chunk": chunk, "attempt": attempt} if RELAY == "offset" else {}
                show(order_id, event.delta.text, **identity)
                chunk += 1
        reply = stream.get_final_message()
    return {"stop_reason": reply.stop_reason, "content": content_to_dicts(reply.content)}


def run(order_id: str) -> None:
    log = state_dir() / f"{order_id}.jsonl"
    events = read_order_log(log)
    if events and events[-1]["type"] == "final":
        return
    messages, pending = rebuild(order_task(order_id), events)
    step = sum(event["type"] == "decision" for event in events)
    while True:
        if pending is None:
            reply = streamed_reply(order_id, messages)
            if reply["stop_reason"] != "tool_use":
                append_event(log, {"type": "final", "content": reply["content"]})
                return
            append_event(log, {"type": "decision", "content": reply["content"]})
            messages.append({"role": "assistant", "content": reply["content"]})
            pending, step = first_tool_use(reply["content"]), step + 1
        result = call_tool(pending["name"], pending["input"], idempotency_key=f"{order_id}:{step}")
        append_event(log, {"type": "result", "tool_use_id": pending["id"], "result": result})
        messages.append(tool_result_message(pending["id"], result))
        pending = None


if __name__ == "__main__":
    agent_main(run)
