"""The agent-side clients: tool-call validation, the tool client, the model client, agent_main.

Effects are always counted from the world's ledgers, never from what a client returned.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from crashlab import agent
from crashlab.agent import (MalformedToolCall, ModelCallFailed, ToolCallFailed, WorldNotRunning, call_tool,
                            validate_tool_call)
from crashlab.envnames import ENV_MODEL_URL, ENV_SERVICES_URL, ENV_STATE_DIR
from crashlab.harness import run_agent, run_python
from crashlab.errors import HOW_TO_START
from crashlab.order import AMOUNT, ORDER_ID, SKU, TOOLS, order_task
from crashlab.world import World

AGENTS = Path(__file__).parents[1] / "agents"
NAIVE = AGENTS / "naive_agent.py"
LOGGED = AGENTS / "logged_agent.py"
WORLD_ENV = (ENV_MODEL_URL, ENV_SERVICES_URL, ENV_STATE_DIR)  # where an agent finds the world


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


@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
def test_malformed_call_through_call_tool_causes_no_effect(world):
    for name, args in [("refund_card", {"order_id": ORDER_ID}), ("charge_card", {"order_id": ORDER_ID}),
                       ("charge_card", {"order_id": ORDER_ID, "amount": True})]:
        with pytest.raises(MalformedToolCall):
            call_tool(name, args)
    assert world.audit().counts == {"charge": 0, "reservation": 0, "confirmation": 0}


# --- call_tool against a world -------------------------------------------------------------------

@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
def test_call_tool_makes_one_effect_per_call_without_a_key(world):
    first = agent.send_confirmation(ORDER_ID)
    second = agent.send_confirmation(ORDER_ID)
    audit = world.audit()
    assert [e["id"] for e in audit.effects["confirmation"]] == [first["id"], second["id"]]
    assert audit.duplicated == ["confirmation"]
    assert "replayed" not in second


@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
def test_call_tool_with_a_key_replays(world):
    first = agent.charge_card(ORDER_ID, AMOUNT, idempotency_key="order-ORD-8842-charge")
    again = agent.charge_card(ORDER_ID, AMOUNT, idempotency_key="order-ORD-8842-charge")
    assert again["replayed"] is True and "replayed" not in first
    assert again["id"] == first["id"]
    [effect] = world.audit().effects["charge"]
    assert effect["id"] == first["id"]


@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
def test_call_tool_reports_a_lost_ack_as_tool_call_failed(world):
    world.inject("lost_ack:reserve_item")
    with pytest.raises(ToolCallFailed, match="may or may not have happened"):
        agent.reserve_item(ORDER_ID, SKU, idempotency_key="k")
    [effect] = world.audit().effects["reservation"]
    retry = agent.reserve_item(ORDER_ID, SKU, idempotency_key="k")
    assert retry["replayed"] is True and retry["id"] == effect["id"]
    assert world.audit().counts["reservation"] == 1


@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
def test_call_tool_reports_a_service_error_as_tool_call_failed(world):
    agent.charge_card(ORDER_ID, AMOUNT, idempotency_key="k")
    with pytest.raises(ToolCallFailed, match="400.*idempotency_error"):
        agent.charge_card(ORDER_ID, 1.0, idempotency_key="k")
    assert world.audit().counts["charge"] == 1


@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
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


# --- a connection that breaks: the request may have landed, so the call fails as retryable --------

@contextmanager
def misbehaving_server(mode: str):
    """An HTTP server on 127.0.0.1 that reads each request whole and then, by ``mode``: ``reset`` -- resets
    the connection; ``close`` -- closes it without a reply; ``silent`` -- never answers; ``500`` -- answers
    500 with an API error. Yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    held, done = [], threading.Event()

    def serve():
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)
            conn.settimeout(10)
            data = chunk = b"-"
            while chunk and b"\r\n\r\n" not in data:
                data += (chunk := conn.recv(65536))
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while chunk and len(body) < length:
                body += (chunk := conn.recv(65536))
            if mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            elif mode == "close":
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            elif mode == "500":
                error = json.dumps({"type": "error", "error": {"type": "api_error", "message": "disk full"}}).encode()
                conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(error), error))
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        listener.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize("mode, words", [
    ("reset", "the connection to the service was lost before its reply"),
    ("close", "closed the connection without a reply"),
    ("silent", "no reply from the service within 0.5 s"),
])
def test_a_tool_call_that_gets_no_reply_fails_as_retryable(no_world_env, monkeypatch, mode, words):
    monkeypatch.setattr(agent.tools, "TOOL_TIMEOUT", 0.5)
    with misbehaving_server(mode) as url:
        monkeypatch.setenv("CRASHLAB_SERVICES_URL", url)
        with pytest.raises(ToolCallFailed) as failed:
            call_tool("charge_card", {"order_id": ORDER_ID, "amount": AMOUNT}, idempotency_key="ORD-8842:1")
    assert failed.value.status is None and failed.value.retryable  # same key again: replayed or done once
    assert words in str(failed.value) and "may or may not have happened" in str(failed.value)


@pytest.mark.parametrize("mode, words, status", [
    ("reset", "the connection to the model at http://127.0.0.1:", None),
    ("close", "was lost before its reply (RemoteProtocolError)", None),
    ("silent", "did not answer within its timeout", None),
    ("500", "answered 500", 500),
])
def test_a_model_call_that_breaks_is_one_model_call_failed(no_world_env, monkeypatch, mode, words, status):
    monkeypatch.setattr(agent.model, "MODEL_TIMEOUT", 0.5)
    with misbehaving_server(mode) as url:
        monkeypatch.setenv("CRASHLAB_MODEL_URL", url)
        with pytest.raises(ModelCallFailed) as failed:
            agent.model_client().messages.create(model=agent.MODEL, max_tokens=agent.MAX_TOKENS, tools=TOOLS,
                                                 messages=[{"role": "user", "content": order_task()}])
    assert failed.value.status == status and failed.value.retryable
    assert words in str(failed.value) and "\n" not in str(failed.value)


def test_agent_main_prints_a_broken_connection_as_one_line(no_world_env, monkeypatch, capsys):
    monkeypatch.setattr(agent.tools, "TOOL_TIMEOUT", 0.5)
    with misbehaving_server("reset") as url:
        monkeypatch.setenv("CRASHLAB_SERVICES_URL", url)
        with pytest.raises(SystemExit) as exited:
            agent.agent_main(lambda order_id: call_tool("send_confirmation", {"order_id": order_id}), argv=[])
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: send_confirmation: the connection to the service was lost")


# --- the model client ------------------------------------------------------------------------------

@pytest.mark.usefixtures("world_env")  # the agent's clients in this process find the world
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

    messages = agent.model.Messages(FakeSDK, "a fake model")
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


# --- a damaged event log through a whole agent process ---------------------------------------------

def test_a_damaged_line_in_the_log_stops_the_agent_with_one_clear_error(tmp_path, no_world_env, world):
    """Lesson 1's logged agent reads its log before anything else; a damaged line in the middle (not a torn
    tail) is a CorruptLogError, which the agent prints as one line, exit code 2 -- no traceback."""
    state = tmp_path / "agent"
    state.mkdir()
    decision = {"type": "decision", "content": [{"type": "tool_use", "id": "toolu_1", "name": "charge_card",
                                                 "input": {"order_id": ORDER_ID, "amount": AMOUNT}}]}
    result = {"type": "result", "tool_use_id": "toolu_1", "result": {"status": "succeeded"}}
    (state / f"{ORDER_ID}.jsonl").write_text(json.dumps(decision) + "\n" + '{"type": "resu\x00lt", ' + "\n"
                                             + json.dumps(result) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in WORLD_ENV and k != "CRASHLAB_GRADING_LESSON"}
    # (with no world at all, the agent says that first)
    run = run_python([LOGGED, "--order", ORDER_ID], env={**env, **world.env(), "CRASHLAB_STATE_DIR": str(state)},
                     timeout=60)
    assert world.audit().model_calls == 0
    assert run.returncode == 2, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert f"{ORDER_ID}.jsonl: line 2 is damaged" in lines[0]


@pytest.mark.parametrize("content, words", [
    ('{"type": "decision", "contents": []}', "line 1 is a decision record without its content"),
    ('{"type": "result", "tool_use_id": "toolu_1"}', "line 1 is a result record without its result"),
    ('{"type": "note", "text": "mine"}', "line 1 has no known type"),
    ('{"type": "final", "content": []}', "line 1 is a final answer without its text"),
    (None, "is a folder, not an event log"),
])
def test_a_log_of_the_wrong_shape_is_one_clear_error(tmp_path, content, words):
    """Well-formed JSON that is not a record of the log, or a folder where the log goes: one CorruptLogError that
    says what is wrong (the loop stopped on a KeyError or an IsADirectoryError before)."""
    from crashlab.answers.lesson01 import read_events, read_order_log
    from crashlab.eventlog import CorruptLogError

    log = tmp_path / f"{ORDER_ID}.jsonl"
    if content is None:
        log.mkdir()
    else:
        log.write_text(content + "\n")
        assert read_events(log)  # another log (a saga's undo journal) may hold records of its own kinds
    with pytest.raises(CorruptLogError, match=words) as raised:
        read_order_log(log)
    assert "\n" not in str(raised.value)


def test_an_agent_refuses_an_order_id_the_world_would_read_as_another_order(tmp_path):
    """``ORD-77_C`` is read by the world as ORD-77: an agent that took it would charge ORD-77 a second time."""
    import subprocess
    import sys

    agent = tmp_path / "agent.py"
    agent.write_text("from crashlab.agent import agent_main\nagent_main(lambda order: print('ran', order))\n")
    done = subprocess.run([sys.executable, str(agent), "--order", "ORD-77_C"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "is not an order id" in done.stderr and "ran" not in done.stdout


def test_an_order_id_too_long_for_a_file_name_is_refused_in_one_line(tmp_path, capsys):
    """Agents name files, locks and workflows after the order: a 300-character id was "File name too long" tracebacks
    deep inside an engine. Every way in refuses it in one line: an agent's --order, the CLI, the world."""
    import subprocess
    import sys

    from crashlab.cli import main
    from crashlab.order import MAX_ORDER_ID, check_order_id

    longest = "ORD-" + "7" * (MAX_ORDER_ID - 4)
    assert check_order_id(longest) == longest
    too_long = "ORD-" + "7" * 296
    with pytest.raises(ValueError, match=f"at most {MAX_ORDER_ID} characters, got one of 300"):
        check_order_id(too_long)
    agent = tmp_path / "agent.py"
    agent.write_text("from crashlab.agent import agent_main\nagent_main(lambda order: print('ran', order))\n")
    done = subprocess.run([sys.executable, str(agent), "--order", too_long], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "at most 64 characters" in done.stderr and "ran" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 2 and len(done.stderr) < 400, done.stderr  # usage + one line
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "--order", too_long])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "at most 64 characters" in err, err


def test_an_agent_with_no_world_running_says_so_in_one_line_and_exits_at_once(tmp_path):
    """Where a DBOS agent retried a missing world for up to an hour, a traceback per try, every agent now finds out
    before it starts anything: one line, exit 2, no engine touched."""
    import socket
    import subprocess
    import sys

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    agent = tmp_path / "agent.py"
    agent.write_text("from crashlab.agent import agent_main\nagent_main(lambda order: print('ran', order))\n")
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "CRASHLAB_SERVICES_URL": url, "CRASHLAB_MODEL_URL": url, "CRASHLAB_STATE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(agent)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and "ran" not in done.stdout, done
    assert done.stderr.startswith(f"error: no world is running at {url} (Connection refused)"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    unset = {k: v for k, v in env.items() if k != "CRASHLAB_SERVICES_URL"}
    done = subprocess.run([sys.executable, str(agent)], capture_output=True, text=True, timeout=60, env=unset)
    assert done.returncode == 2 and "CRASHLAB_SERVICES_URL is not set" in done.stderr and done.stderr.count("\n") == 1


def test_an_engines_retry_warning_is_one_line_with_its_error_not_a_traceback():
    """DBOS logs each retry of a step as a warning carrying the error's traceback, temporalio each failed activity
    attempt; agent_main makes every such warning one line. Errors keep their traceback."""
    import io
    import logging

    from crashlab.agent.retries import one_line_retries

    one_line_retries()
    one_line_retries()  # twice: still one filter
    logger = logging.getLogger("dbos")
    assert len(logger.filters) == 1
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    try:
        try:
            raise WorldNotRunning("cannot reach the services at http://127.0.0.1:9; " + HOW_TO_START)
        except WorldNotRunning:
            logger.warning("Step being automatically retried (attempt 3 of 1000)", exc_info=True)
            logger.error("a real error", exc_info=True)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[0] == ("Step being automatically retried (attempt 3 of 1000): WorldNotRunning: cannot reach the "
                        "services at http://127.0.0.1:9"), lines[0]
    assert lines[1] == "a real error" and lines[2].startswith("Traceback"), lines
    restate = logging.getLogger("restate.server_context")
    restate.addHandler(handler)
    try:
        try:  # how Restate's SDK raises a failed ctx.run: the step's traceback inside the message
            raise WorldNotRunning("(500) WorldNotRunning('cannot reach the services')\nStacktrace: Traceback (most "
                                  "recent call last):\n  File \"x.py\", line 1\n\nRelated command: run [reserve_item]")
        except WorldNotRunning as exc:
            restate.exception("Exception in do_progress", exc_info=exc)
    finally:
        restate.removeHandler(handler)
    assert out.getvalue().splitlines()[-1] == ("Exception in do_progress (run [reserve_item]): WorldNotRunning: (500) "
                                               "WorldNotRunning('cannot reach the services')"), out.getvalue()
