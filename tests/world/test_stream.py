"""The world's streamed model reply: what the real SDK reads from it, that a request without ``"stream": true`` is
answered exactly as before, and that a stream cut mid-answer reaches an agent as one line, not a traceback.

One world for the module, streaming fast (a thousandth of a second per text delta): nothing here waits on the pace.
Every order is the module's own, so the tests share the world without reading each other's ledger rows.
"""

from __future__ import annotations

import json
import sqlite3

import anthropic
import httpx
import pytest

from crashlab.agent import MAX_TOKENS, MODEL, ModelCallFailed, model_client
from crashlab.agent.model import sdk_http_library
from crashlab.order import TOOLS, order_task
from crashlab.world import World, WorldError

PACE = 0.001


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The module's one world (conftest's ``world_env`` puts its endpoints in the environment)."""
    with World.start(tmp_path_factory.mktemp("stream") / "world") as world:
        world.streaming(pace=PACE)
        yield world


def sdk(world: World) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=world.url, api_key="x", max_retries=0)


def task(order_id: str) -> list[dict]:
    return [{"role": "user", "content": order_task(order_id)}]


def ledger_calls(world: World, order_id: str) -> list[dict]:
    conn = sqlite3.connect(f"file:{world.ledger_dir / 'model.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM calls WHERE order_id = ? ORDER BY seq", (order_id,))]
    finally:
        conn.close()


def answered(messages: list[dict], reply) -> list[dict]:
    """The conversation with ``reply`` (a tool_use turn) and a successful result for its tool."""
    use = next(b for b in reply.content if b.type == "tool_use")
    content = [b.model_dump(include={"type", "text", "id", "name", "input"}) for b in reply.content]
    return messages + [{"role": "assistant", "content": content},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                     "content": '{"status": "succeeded"}'}]}]


def test_the_sdk_reads_a_streamed_reply_with_text_and_a_tool_call_as_the_non_streamed_one(world):
    client, order = sdk(world), "ORD-S1"
    plain = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=task(order))
    kinds = []
    with client.messages.stream(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=task(order)) as stream:
        for event in stream:
            kinds.append(event.type if event.type != "content_block_delta" else event.delta.type)
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    assert kinds.count("text_delta") == len(plain.content[0].text.split()) and "input_json" in kinds, kinds
    assert final.stop_reason == plain.stop_reason == "tool_use"
    assert final.content[0].text == plain.content[0].text
    assert (final.content[1].name, final.content[1].input) == (plain.content[1].name, plain.content[1].input)
    assert final.usage.output_tokens == plain.usage.output_tokens

    raw = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=task(order), stream=True)
    events = list(raw)
    pieces = [e.delta.partial_json for e in events if e.type == "content_block_delta"
              and e.delta.type == "input_json_delta"]
    assert len(pieces) > 2 and json.loads("".join(pieces)) == plain.content[1].input
    started = next(e for e in events if e.type == "message_start").message.id

    calls = ledger_calls(world, order)  # a streamed call is logged like any other, its reply's id the attempt
    assert [json.loads(c["reply"])["id"] for c in calls[1:]] == [final.id, started]
    assert (world.audit(order).model_calls, world.audit(order).repeated_model_calls) == (3, 2)


def test_the_courses_client_streams_the_final_answer_word_by_word(world, world_env):
    client, order = model_client(), "ORD-S2"
    messages = task(order)
    for _ in range(3):
        messages = answered(messages, client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,
                                                             messages=messages))
    with client.messages.stream(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn" and len(pieces) > 10
    assert "".join(pieces) == final.content[0].text == stream.get_final_text()
    assert world.audit(order).finished is False  # the model's answer alone finishes no order: no effects


def test_a_reply_not_asked_as_a_stream_is_the_same_bytes_as_before(world):
    order = "ORD-S3"
    for extra in ({}, {"stream": False}):
        reply = httpx.post(f"{world.url}/v1/messages", timeout=30,
                           json={"model": MODEL, "max_tokens": MAX_TOKENS, "tools": TOOLS, "messages": task(order),
                                 **extra})
        logged = ledger_calls(world, order)[-1]["reply"]
        assert reply.headers["content-type"] == "application/json"
        assert reply.content == logged.encode() and reply.headers["content-length"] == str(len(reply.content))
    streamed = httpx.post(f"{world.url}/v1/messages", timeout=30, json={
        "model": MODEL, "max_tokens": MAX_TOKENS, "tools": TOOLS, "messages": task(order), "stream": True})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text.startswith("event: message_start\ndata: ") and streamed.text.endswith("event: message_stop\n"
                                                                                               'data: {"type":"message_stop"}\n\n')


def test_a_stream_cut_mid_answer_is_one_line_for_the_agent_and_the_http_librarys_error_for_the_bare_sdk(
        world, world_env):
    order = "ORD-S4"
    world.inject("cut_stream", arg="2", order_id=order)
    with pytest.raises(sdk_http_library().RemoteProtocolError):  # what the SDK lets through, mid-iteration
        with sdk(world).messages.stream(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,
                                               messages=task(order)) as stream:
            list(stream)
    world.inject("cut_stream", arg="2", order_id=order)
    seen = []
    with pytest.raises(ModelCallFailed) as failed:
        with model_client().messages.stream(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,
                                            messages=task(order)) as stream:
            for event in stream:
                if event.type == "text":
                    seen.append(event.text)
    message = str(failed.value)
    assert "\n" not in message and "cut mid-answer" in message and "not received whole" in message, message
    assert failed.value.retryable and failed.value.status is None
    assert seen == ["Next", " step:"]  # the two text deltas sent before the cut, then the error: nothing more
    assert failed.value.__cause__ is None and failed.value.__suppress_context__


def test_stream_settings_and_the_cut_fault_refuse_what_they_cannot_use(world):
    with pytest.raises(WorldError, match="pace must be seconds per text delta"):
        world.streaming(pace=-1)
    with pytest.raises(ValueError, match="cut_stream needs arg= how many text deltas"):
        world.inject("cut_stream", arg="two")
    assert world.streaming() == {"pace": PACE, "vary_wording": False}
