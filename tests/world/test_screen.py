"""The user's screen: a dumb ledger of every show and retraction, a cursor for a reader that resumes, and its audit
against the model ledger -- text shown twice, out of order, lost, never recorded, identities reused, retractions --
each counted on shows crafted here, for conversations the world's model really answered.

One world for the module; each test has orders of its own.
"""

from __future__ import annotations

import anthropic
import httpx
import pytest

from crashlab.agent import CallFailed, retract, screen_cursor, show
from crashlab.harness.verdicts import judge_screen
from crashlab.order import TOOLS, order_task
from crashlab.world import World
from crashlab.world.screen_audit import ScreenAudit
from crashlab.world.stream import words


pytestmark = pytest.mark.usefixtures("world_env")  # the agent's screen client, used here, finds the world so


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The module's one world (conftest's ``world_env`` puts its endpoints in the environment)."""
    with World.start(tmp_path_factory.mktemp("screen") / "world") as world:
        world.streaming(pace=0)
        yield world


def ask(world: World, messages: list[dict], stream: bool = False) -> dict:
    """One model call, as the raw API body (a streamed one read whole)."""
    body = {"model": "m", "max_tokens": 400, "tools": TOOLS, "messages": messages}
    if not stream:
        return httpx.post(f"{world.url}/v1/messages", json=body, timeout=30).json()
    with anthropic.Anthropic(base_url=world.url, api_key="x", max_retries=0).messages.stream(**body) as s:
        return s.get_final_message().model_dump(include={"id", "content", "stop_reason"})


def converse(world: World, order_id: str) -> list[dict]:
    """The order's whole conversation with the world's model (tool results made up: no tool is called): the four
    replies the conversation records, each ``{"id", "text", "chunks"}``."""
    messages: list[dict] = [{"role": "user", "content": order_task(order_id)}]
    replies = []
    while True:
        reply = ask(world, messages)
        text = "".join(b["text"] for b in reply["content"] if b["type"] == "text")
        replies.append({"id": reply["id"], "text": text, "chunks": words(text)})
        if reply["stop_reason"] != "tool_use":
            return replies
        use = next(b for b in reply["content"] if b["type"] == "tool_use")
        messages += [{"role": "assistant", "content": reply["content"]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "{}"}]}]


def show_turn(order_id: str, turn: int, reply: dict, chunks: list[int] | None = None, identity: bool = True) -> None:
    for index in range(len(reply["chunks"])) if chunks is None else chunks:
        extra = {"turn": turn, "chunk": index, "attempt": reply["id"]} if identity else {}
        show(order_id, reply["chunks"][index], **extra)


def test_every_chunk_shown_once_in_order_is_clean_and_the_screen_shows_the_recorded_answer(world):
    order = "ORD-C1"
    replies = converse(world, order)
    for turn, reply in enumerate(replies, start=1):
        show_turn(order, turn, reply)
    audit = world.screen_audit(order)
    assert audit.clean and audit.retractions == 0, audit
    assert audit.visible == audit.expected == "".join(r["text"] for r in replies)
    assert audit.shows == sum(len(r["chunks"]) for r in replies)
    assert world.screen(order)["text"] == audit.visible
    assert str(audit) == f"screen of {order}: {audit.shows} shows, 0 retractions -- clean"


def test_half_an_answer_then_the_whole_answer_is_shown_twice(world):
    order = "ORD-C2"
    replies = converse(world, order)
    show_turn(order, 1, replies[0], identity=False)
    show_turn(order, 2, replies[1], chunks=[0, 1], identity=False)  # "Next step:", then the process died
    for turn, reply in enumerate(replies[1:], start=2):
        show_turn(order, turn, reply, identity=False)
    audit = world.screen_audit(order)
    assert audit.counts == {"shown twice": 1, "out of order": 0, "lost": 0, "never recorded": 0,
                            "identity reused": 0}, audit
    assert audit.shown_twice == ['"Next step:"'] and not audit.clean
    assert judge_screen("mid:model#2@chunk2", audit) == ['mid:model#2@chunk2: on the user\'s screen, shown twice: '
                                                         '"Next step:"']


def test_a_chunk_shown_after_a_later_one_is_out_of_order_and_its_identity_says_so(world):
    order = "ORD-C3"
    replies = converse(world, order)
    show_turn(order, 1, replies[0], chunks=[0, 2, 1])  # "Next", " charge_card.", " step:"
    for turn, reply in enumerate(replies[1:], start=2):
        show_turn(order, turn, reply)
    audit = world.screen_audit(order)
    assert audit.counts == {"shown twice": 0, "out of order": 1, "lost": 0, "never recorded": 0,
                            "identity reused": 1}, audit
    assert audit.out_of_order == ['"charge_card."'] and "(turn 1, chunk 1) shown after chunk 2" in audit.identity_reused[0]


def test_text_never_shown_is_lost_and_text_no_recorded_reply_has_is_never_recorded(world):
    order = "ORD-C4"
    replies = converse(world, order)
    for turn, reply in enumerate(replies[:3], start=1):
        show_turn(order, turn, reply)
    show(order, "Your refund is on its way.")  # no reply said this
    show_turn(order, 4, replies[3], chunks=list(range(6)))  # the final answer, cut after six words
    audit = world.screen_audit(order)
    assert audit.counts == {"shown twice": 0, "out of order": 0, "lost": 1, "never recorded": 1,
                            "identity reused": 0}, audit
    assert audit.never_recorded == ['"Your refund is on its way."']
    assert audit.lost == [repr_json("".join(replies[3]["chunks"][6:]).split())]


def repr_json(text_words: list[str]) -> str:
    import json

    return json.dumps(" ".join(text_words))


def test_a_reworded_repeat_that_was_not_recorded_is_never_recorded_and_a_retraction_makes_it_right(world):
    order, other = "ORD-C5", "ORD-C6"
    world.streaming(vary_wording=True)
    try:
        replies = converse(world, order)  # not streamed: worded as always
        asked = [{"role": "user", "content": order_task(order)}]
        first, again = ask(world, asked, stream=True), ask(world, asked, stream=True)
    finally:
        world.streaming(vary_wording=False)
    # the third and fourth calls of the same conversation: the streamed repeats are worded as the 1st and 2nd repeat
    assert first["content"][0]["text"] == "Now: " + replies[0]["text"]
    assert again["content"][0]["text"] == "Next I will call a tool. " + replies[0]["text"]
    # the conversation went on with the first reply: the streamed ones were never recorded
    show(order, first["content"][0]["text"], turn=1, chunk=0, attempt=first["id"])
    for turn, reply in enumerate(replies, start=1):
        show_turn(order, turn, reply)
    audit = world.screen_audit(order)
    assert audit.never_recorded == ['"Now:"'] and audit.shown_twice == [repr_json(replies[0]["text"].split())]
    assert audit.identity_reused and audit.retractions == 0
    # the same, the stale attempt withdrawn before the recorded one is shown: clean, one retraction
    replies = converse(world, other)
    show(other, "Now: Next", turn=1, chunk=0, attempt="msg_killed")
    assert screen_cursor(other) == {"turns": {"1": 0}, "attempts": {"1": "msg_killed"}, "next_offset": 0}
    retract(other, 1)
    for turn, reply in enumerate(replies, start=1):
        show_turn(other, turn, reply)
    audit = world.screen_audit(other)
    assert audit.clean and audit.retractions == 1, audit
    assert judge_screen("mid:model#1@chunk2", audit) == []
    assert judge_screen("before:charge_card", audit) == [
        "before:charge_card: 1 retraction(s) of text the user was shown -- none is needed here: nothing was shown "
        "of an answer the run did not receive whole"]


def test_identities_from_a_counter_that_starts_again_collide_though_the_words_are_right(world):
    order = "ORD-C7"
    replies = converse(world, order)
    for reply in replies:  # every process numbers its chunks from 0 in "turn 1": the words are right, the ids are not
        for index, chunk in enumerate(reply["chunks"]):
            show(order, chunk, turn=1, chunk=index)
    audit = world.screen_audit(order)
    assert audit.counts["shown twice"] == audit.counts["lost"] == audit.counts["never recorded"] == 0
    assert len(audit.identity_reused) == 9 and not audit.clean, audit  # chunks 0-2 of turns 2, 3 and 4 again


def test_the_cursor_tells_a_resumable_reader_where_the_user_stands(world):
    order = "ORD-C8"
    for offset, text in enumerate(["a", " b", " c"]):
        show(order, text, stream="answer", offset=offset, turn=2, chunk=offset, attempt="msg_x")
    show(order, "z", stream="other", offset=7)
    assert screen_cursor(order, stream="answer") == {"turns": {"2": 2}, "attempts": {"2": "msg_x"}, "next_offset": 3}
    assert screen_cursor(order)["next_offset"] == 0 and screen_cursor(order, "other")["next_offset"] == 8
    assert screen_cursor("ORD-C9") == {"turns": {}, "attempts": {}, "next_offset": 0}


def test_the_screen_refuses_a_show_it_cannot_record_in_one_line_and_keeps_its_audit_for_the_harness(world):
    with pytest.raises(CallFailed, match=r"400 \(screen show: turn must be an integer >= 1, got 0\)"):
        show("ORD-C10", "hello", turn=0)
    refused = httpx.post(f"{world.url}/screen/retract", json={"order_id": "ORD-C10"}, timeout=10)
    assert refused.status_code == 400 and "a retraction names the turn" in refused.json()["error"]["message"]
    for bad in ({"order_id": "nope", "text": "x"}, {"order_id": "ORD-C10", "text": 3},
                {"order_id": "ORD-C10", "text": "x", "attempt": 5}):
        assert httpx.post(f"{world.url}/screen/show", json=bad, timeout=10).status_code == 400, bad
    assert world.screen("ORD-C10") == {"text": "", "rows": []}
    assert httpx.get(f"{world.url}/_admin/screen", params={"order_id": "ORD-C10"}, timeout=10).status_code == 403
    audit = world.screen_audit("ORD-C10")
    assert isinstance(audit, ScreenAudit) and audit.clean and audit.shows == 0
