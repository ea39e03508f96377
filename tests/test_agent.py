"""The agent-side clients: tool-call validation, the tool client, the model client, agent_main.

Effects are always counted from the world's ledgers, never from what a client returned.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from crashlab import agent
from crashlab.agent import MalformedToolCall, ToolCallFailed, WorldNotRunning, call_tool, validate_tool_call
from crashlab.harness import run_agent
from crashlab.order import AMOUNT, ORDER_ID, SKU, TOOLS, order_task
from crashlab.world import World

AGENTS = Path(__file__).parent / "agents"
NAIVE = AGENTS / "naive_agent.py"
ENV_VARS = ("CRASHLAB_MODEL_URL", "CRASHLAB_SERVICES_URL", "CRASHLAB_STATE_DIR", "CRASHLAB_CRASH_AT",
            "CRASHLAB_CRASH_MARKER", "CRASHLAB_REAL_MODEL")


@pytest.fixture
def no_world_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def world(tmp_path, monkeypatch, no_world_env):
    """A running world whose endpoints this (test) process uses, with no crash point set."""
    with World.start(tmp_path / "world") as world:
        for name in ("CRASHLAB_MODEL_URL", "CRASHLAB_SERVICES_URL", "CRASHLAB_STATE_DIR"):
            monkeypatch.setenv(name, world.env()[name])
        yield world


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- validate_tool_call --------------------------------------------------------------------------

@pytest.mark.parametrize("name, args", [
    ("charge_card", {"order_id": ORDER_ID, "amount": AMOUNT}),
    ("charge_card", {"order_id": ORDER_ID, "amount": 50}),
    ("reserve_item", {"order_id": ORDER_ID, "sku": SKU}),
    ("send_confirmation", {"order_id": ORDER_ID}),
])
def test_valid_tool_calls_pass(name, args):
    validate_tool_call(name, args)


@pytest.mark.parametrize("name, args, message", [
    ("refund_card", {"order_id": ORDER_ID}, "unknown tool 'refund_card'"),
    ("", {}, "unknown tool"),
    (None, {}, "unknown tool"),
    ("charge_card", {"order_id": ORDER_ID}, r"missing argument\(s\) \['amount'\]"),
    ("send_confirmation", {}, r"missing argument\(s\) \['order_id'\]"),
    ("reserve_item", {"order_id": ORDER_ID, "sku": SKU, "qty": 2}, r"unexpected argument\(s\) \['qty'\]"),
    ("charge_card", {"order_id": ORDER_ID, "amount": True}, "'amount' should be a number"),
    ("charge_card", {"order_id": ORDER_ID, "amount": "49.99"}, "'amount' should be a number"),
    ("charge_card", {"order_id": ORDER_ID, "amount": None}, "'amount' should be a number"),
    ("send_confirmation", {"order_id": 8842}, "'order_id' should be a string"),
    ("reserve_item", {"order_id": ORDER_ID, "sku": ["SKU-772"]}, "'sku' should be a string"),
    ("charge_card", [ORDER_ID, AMOUNT], "arguments must be an object"),
])
def test_malformed_tool_calls_are_rejected(name, args, message):
    with pytest.raises(MalformedToolCall, match=message):
        validate_tool_call(name, args)


def test_malformed_call_is_rejected_before_any_network(no_world_env, monkeypatch):
    monkeypatch.setenv("CRASHLAB_SERVICES_URL", f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(MalformedToolCall):
        call_tool("charge_card", {"order_id": ORDER_ID, "amount": False})


def test_malformed_call_through_call_tool_causes_no_effect(world):
    for name, args in [("refund_card", {"order_id": ORDER_ID}), ("charge_card", {"order_id": ORDER_ID}),
                       ("charge_card", {"order_id": ORDER_ID, "amount": True})]:
        with pytest.raises(MalformedToolCall):
            call_tool(name, args)
    assert world.audit().counts == {"charge": 0, "reservation": 0, "confirmation": 0}


# --- call_tool against a world -------------------------------------------------------------------

def test_call_tool_makes_one_effect_per_call_without_a_key(world):
    first = agent.send_confirmation(ORDER_ID)
    second = agent.send_confirmation(ORDER_ID)
    audit = world.audit()
    assert [e["id"] for e in audit.effects["confirmation"]] == [first["id"], second["id"]]
    assert audit.duplicated == ["confirmation"]
    assert "replayed" not in second


def test_call_tool_with_a_key_replays(world):
    first = agent.charge_card(ORDER_ID, AMOUNT, idempotency_key="order-ORD-8842-charge")
    again = agent.charge_card(ORDER_ID, AMOUNT, idempotency_key="order-ORD-8842-charge")
    assert again["replayed"] is True and "replayed" not in first
    assert again["id"] == first["id"]
    [effect] = world.audit().effects["charge"]
    assert effect["id"] == first["id"]


def test_call_tool_reports_a_lost_ack_as_tool_call_failed(world):
    world.inject("lost_ack:reserve_item")
    with pytest.raises(ToolCallFailed, match="may or may not have happened"):
        agent.reserve_item(ORDER_ID, SKU, idempotency_key="k")
    [effect] = world.audit().effects["reservation"]
    retry = agent.reserve_item(ORDER_ID, SKU, idempotency_key="k")
    assert retry["replayed"] is True and retry["id"] == effect["id"]
    assert world.audit().counts["reservation"] == 1


def test_call_tool_reports_a_service_error_as_tool_call_failed(world):
    agent.charge_card(ORDER_ID, AMOUNT, idempotency_key="k")
    with pytest.raises(ToolCallFailed, match="400.*idempotency_error"):
        agent.charge_card(ORDER_ID, 1.0, idempotency_key="k")
    assert world.audit().counts["charge"] == 1


@pytest.mark.parametrize("key", ["", "   ", 42])
def test_an_empty_or_non_string_key_raises_before_any_effect(world, key):
    with pytest.raises(ValueError, match="idempotency_key"):
        call_tool("charge_card", {"order_id": ORDER_ID, "amount": AMOUNT}, idempotency_key=key)
    assert world.audit().counts["charge"] == 0


# --- no world ----------------------------------------------------------------------------------------

def test_call_tool_without_env_raises_world_not_running(no_world_env):
    with pytest.raises(WorldNotRunning, match="crashlab world start"):
        call_tool("send_confirmation", {"order_id": ORDER_ID})


def test_model_client_without_env_raises_world_not_running(no_world_env):
    with pytest.raises(WorldNotRunning, match="crashlab world start"):
        agent.model_client()


def test_state_dir_without_env_raises_world_not_running(no_world_env):
    with pytest.raises(WorldNotRunning, match="crashlab world start"):
        agent.state_dir()


def test_call_tool_to_a_closed_port_raises_world_not_running(no_world_env, monkeypatch):
    monkeypatch.setenv("CRASHLAB_SERVICES_URL", f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(WorldNotRunning, match="crashlab world start"):
        call_tool("send_confirmation", {"order_id": ORDER_ID})


def test_model_client_to_a_closed_port_raises_world_not_running(no_world_env, monkeypatch):
    monkeypatch.setenv("CRASHLAB_MODEL_URL", f"http://127.0.0.1:{closed_port()}")
    client = agent.model_client()
    with pytest.raises(WorldNotRunning, match="crashlab world start"):
        client.messages.create(model=agent.MODEL, max_tokens=agent.MAX_TOKENS, tools=TOOLS,
                               messages=[{"role": "user", "content": order_task()}])


# --- the model client ------------------------------------------------------------------------------

def test_model_client_talks_to_the_world_without_hidden_retries(world):
    client = agent.model_client()
    assert client.sdk.max_retries == 0
    reply = client.messages.create(model=agent.MODEL, max_tokens=agent.MAX_TOKENS, tools=TOOLS,
                                   messages=[{"role": "user", "content": order_task()}])
    block = agent.first_tool_use(reply.content)
    assert (block["name"], block["input"]) == ("charge_card", {"order_id": ORDER_ID, "amount": AMOUNT})
    assert agent.content_to_dicts(reply.content)[-1] == block
    audit = world.audit()
    assert (audit.model_calls, audit.repeated_model_calls) == (1, 0)


def test_the_model_is_asked_for_one_tool_per_turn_unless_the_caller_chooses():
    """A real model may ask for several tools in one reply; the course's one-tool-per-turn loops would
    answer only the first, and the API refuses a conversation with an unanswered tool_use."""
    sent = []

    class FakeSDK:
        class messages:  # noqa: N801 -- stands in for the SDK's attribute
            @staticmethod
            def create(**kwargs):
                sent.append(kwargs)

    messages = agent._Messages(FakeSDK, "a fake model")
    messages.create(model=agent.MODEL, max_tokens=10, tools=TOOLS, messages=[])
    messages.create(model=agent.MODEL, max_tokens=10, tools=TOOLS, tool_choice={"type": "any"}, messages=[])
    messages.create(model=agent.MODEL, max_tokens=10, messages=[])
    assert sent[0]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert sent[1]["tool_choice"] == {"type": "any"}
    assert "tool_choice" not in sent[2]


# --- a malformed reply through a whole agent process ----------------------------------------------

@pytest.mark.parametrize("kind, message", [
    ("unknown_tool", "unknown tool"),
    ("missing_args", "missing argument"),
    ("bad_type", "should be a string"),
])
def test_malformed_reply_stops_the_agent_with_one_clear_error(tmp_path, kind, message):
    with World.start(tmp_path / "world") as world:
        world.inject("malformed_reply", arg=kind)
        run = run_agent(NAIVE, world, timeout=60)
        audit = world.audit()
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert message in lines[0]
    assert audit.counts == {"charge": 0, "reservation": 0, "confirmation": 0}
    assert audit.model_calls == 1
