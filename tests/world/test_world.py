"""The world: server life cycle, the scripted model behind the Messages API, the idempotent services,
the injected faults, and the ledgers the audit reads.

Every verdict here comes from the world's own ledgers (``world.audit()`` or the ledger files),
never from what a client says it did.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anthropic
import httpx
import pytest

from crashlab.world.audit import audit as audit_ledgers
from crashlab.order import AMOUNT, ORDER_ID, SKU, TOOLS, order_task
from crashlab.world import LedgerError, World, WorldError

CHARGES = "/payments/charges"
RESERVATIONS = "/inventory/reservations"
EMAILS = "/email/messages"
CHARGE = {"order_id": ORDER_ID, "amount": AMOUNT}
IN_FLIGHT_S = 4.0  # how long a slowed request holds its key: the window the in-flight test's second request needs


def sdk(world: World) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=world.url, api_key="x", max_retries=0)


def ask(client: anthropic.Anthropic, messages: list[dict]):
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=400, tools=TOOLS, messages=messages)


def tool_uses(reply) -> list:
    return [block for block in reply.content if block.type == "tool_use"]


def as_dicts(reply) -> list[dict]:
    """The reply's content as the plain dicts a client sends back."""
    blocks = []
    for block in reply.content:
        if block.type == "text":
            blocks.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)})
    return blocks


def answer(tool_use_id: str, result: dict, *, is_error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": json.dumps(result)}
    if is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def post(world: World, path: str, body, key: str | None = None, **kwargs) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return httpx.post(world.url + path, json=body, headers=headers, timeout=10, **kwargs)


def ledger_rows(world: World, name: str, query: str) -> list[dict]:
    conn = sqlite3.connect(f"file:{world.ledger_dir / name}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(query)]
    finally:
        conn.close()


def pid_running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def listening_addresses(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of every socket listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                found.append(address)
    return found


# --- life cycle ------------------------------------------------------------------------------------

def test_world_listens_on_loopback_only_and_reports_health(world):
    assert world.url == f"http://127.0.0.1:{world.port}"
    assert listening_addresses(world.port) == ["0100007F"]  # 127.0.0.1, nothing on 0.0.0.0 or ::
    health = httpx.get(world.url + "/health", timeout=5)
    assert health.status_code == 200
    body = health.json()
    assert body["ok"] is True
    assert body["pid"] == world.pid
    assert body["pid"] == world.pid and "state_dir" not in body  # nothing about where the ledgers are
    assert world.is_alive()
    assert httpx.get(world.url + "/nowhere", timeout=5).status_code == 404


def test_start_creates_ledgers_and_agent_dir(world):
    for name in ("payments.db", "inventory.db", "email.db", "model.db", "control.db"):
        assert (world.ledger_dir / name).is_file()
    assert world.agent_dir.is_dir()
    env = world.env()
    assert env["CRASHLAB_MODEL_URL"] == env["CRASHLAB_SERVICES_URL"] == world.url
    assert env["CRASHLAB_STATE_DIR"] == str(world.agent_dir)
    assert not [key for key in env if "CRASH_AT" in key or "TOKEN" in key], "an agent is told nothing of crashes"


def test_admin_routes_need_the_token(world):
    for method, path, body in (("GET", "/_admin/crash", None), ("POST", "/_admin/crash", {"point": "before:charge_card"}),
                               ("GET", "/_admin/audit?order_id=ORD-8842", None),
                               ("POST", "/_admin/faults", {"name": "lost_ack:charge_card"}),
                               ("GET", "/_admin/faults", None)):
        for headers in ({}, {"X-Crashlab-Admin": "guess"}):
            reply = httpx.request(method, world.url + path, json=body, headers=headers, timeout=5)
            assert reply.status_code == 403, (method, path, reply.status_code)
    assert world.crash_reached() is None


def test_attach_to_a_running_world(world):
    attached = World.attach(world.state_dir)
    assert (attached.port, attached.pid, attached.url) == (world.port, world.pid, world.url)
    post(world, CHARGES, CHARGE).raise_for_status()
    assert attached.audit().counts["charge"] == 1


def test_attach_without_a_world_says_how_to_start_one(tmp_path):
    with pytest.raises(WorldError, match="crashlab world start"):
        World.attach(tmp_path / "nothing-here")


def test_attach_after_stop_fails(tmp_path):
    world = World.start(tmp_path / "w")
    world.stop()
    with pytest.raises(WorldError, match="no world is running"):
        World.attach(tmp_path / "w")


def test_stop_twice_is_safe(tmp_path):
    world = World.start(tmp_path / "w")
    pid, port = world.pid, world.port
    world.stop()
    world.stop()
    assert not world.is_alive()
    assert not pid_running(pid)
    assert listening_addresses(port) == []
    assert not (world.state_dir / "world.json").exists()


def test_second_stop_does_not_signal_a_reaped_pid(tmp_path, monkeypatch):
    world = World.start(tmp_path / "w")
    world.stop()
    signals = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: signals.append((pid, sig)))
    world.stop()
    assert signals == []


def test_stopping_an_attached_world_stops_the_server(tmp_path):
    with World.start(tmp_path / "w") as world:
        World.attach(world.state_dir).stop()
        deadline = time.monotonic() + 5
        while pid_running(world.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not world.is_alive()
        assert not pid_running(world.pid)


def test_start_refuses_a_second_world_in_a_running_dir_when_not_fresh(world):
    post(world, CHARGES, CHARGE).raise_for_status()
    second = None
    try:
        with pytest.raises(WorldError, match="already running"):
            second = World.start(world.state_dir, fresh=False)
    finally:
        if second is not None:
            second.stop()
    assert world.is_alive()
    assert world.audit().counts["charge"] == 1


def test_start_refuses_a_second_world_in_a_running_dir(world):
    post(world, CHARGES, CHARGE).raise_for_status()
    second = None
    try:
        with pytest.raises(WorldError, match="already running"):
            second = World.start(world.state_dir)
    finally:
        if second is not None:
            second.stop()
    assert world.audit().counts["charge"] == 1  # the running world's ledgers are untouched


def test_world_server_exits_when_its_parent_dies(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from crashlab.world import World
        world = World.start(sys.argv[1])
        print(world.pid, world.port, flush=True)
        time.sleep(120)
    """)
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "w")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    server_pid = None
    try:
        line = child.stdout.readline()
        assert line, child.stderr.read()
        server_pid, port = map(int, line.split())
        assert pid_running(server_pid)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        child.kill()
        child.wait(5)
        deadline = time.monotonic() + 5
        while pid_running(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_running(server_pid), "the world server outlived the process that started it"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)
        child.stdout.close()
        child.stderr.close()
        if server_pid and pid_running(server_pid):
            cmdline = Path(f"/proc/{server_pid}/cmdline").read_bytes()
            if b"crashlab.world.server" in cmdline:
                os.kill(server_pid, signal.SIGKILL)


# --- the model -----------------------------------------------------------------------------------

def test_model_picks_each_tool_in_order_then_ends_turn(world):
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    picked, ids = [], []
    expected_args = {"charge_card": {"order_id": ORDER_ID, "amount": AMOUNT},
                     "reserve_item": {"order_id": ORDER_ID, "sku": SKU},
                     "send_confirmation": {"order_id": ORDER_ID}}
    for _ in range(6):
        reply = ask(client, messages)
        assert isinstance(reply, anthropic.types.Message)
        assert reply.role == "assistant"
        if reply.stop_reason == "end_turn":
            assert not tool_uses(reply)
            assert ORDER_ID in reply.content[0].text
            picked.append("end_turn")
            break
        assert reply.stop_reason == "tool_use"
        [block] = tool_uses(reply)
        assert block.input == expected_args[block.name]
        picked.append(block.name)
        ids.append(block.id)
        messages += [{"role": "assistant", "content": as_dicts(reply)},
                     answer(block.id, {"id": f"fake_{len(ids)}", "status": "succeeded"})]
    assert picked == ["charge_card", "reserve_item", "send_confirmation", "end_turn"]
    assert len(set(ids)) == 3 and all(i.startswith("toolu_") for i in ids)
    audit = world.audit()
    assert audit.model_calls == 4
    assert audit.repeated_model_calls == 0
    assert audit.final_answer_served
    assert audit.counts == {"charge": 0, "reservation": 0, "confirmation": 0}  # the model causes no effect


def test_model_asks_again_for_a_tool_whose_result_was_an_error(world):
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    first = ask(client, messages)
    [block] = tool_uses(first)
    messages += [{"role": "assistant", "content": as_dicts(first)},
                 answer(block.id, {"error": "card declined"}, is_error=True)]
    second = ask(client, messages)
    [again] = tool_uses(second)
    assert again.name == "charge_card"
    assert again.id != block.id


def test_same_messages_get_fresh_tool_use_ids_and_count_as_a_repeat(world):
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    first = ask(client, messages)
    assert world.audit().repeated_model_calls == 0
    second = ask(client, messages)
    assert tool_uses(first)[0].name == tool_uses(second)[0].name == "charge_card"
    assert tool_uses(first)[0].id != tool_uses(second)[0].id
    assert first.id != second.id
    audit = world.audit()
    assert (audit.model_calls, audit.repeated_model_calls) == (2, 1)
    [event] = [e for e in audit.events if e.repeat]
    assert event.label == "model #2 (repeat of #1)"


def test_string_and_text_block_content_are_the_same_request(world):
    client = sdk(world)
    ask(client, [{"role": "user", "content": order_task()}])
    ask(client, [{"role": "user", "content": [{"type": "text", "text": order_task()}]}])
    assert world.audit().repeated_model_calls == 1


def test_different_conversations_are_not_repeats(world):
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    first = ask(client, messages)
    [block] = tool_uses(first)
    ask(client, messages + [{"role": "assistant", "content": as_dicts(first)}, answer(block.id, {"ok": 1})])
    ask(client, [{"role": "user", "content": order_task("ORD-1")}])
    audit = world.audit()
    assert (audit.model_calls, audit.repeated_model_calls) == (2, 0)
    assert world.audit("ORD-1").model_calls == 1


def test_tool_use_without_tool_result_is_a_400_invalid_request(world):
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    first = ask(client, messages)
    messages += [{"role": "assistant", "content": as_dicts(first)},
                 {"role": "user", "content": "go on"}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(client, messages)
    assert caught.value.status_code == 400
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert "tool_result" in caught.value.body["error"]["message"]
    audit = world.audit()
    assert (audit.model_calls, audit.rejected_model_calls) == (1, 1)


@pytest.mark.parametrize("messages", [
    [],
    [{"role": "assistant", "content": "hello"}],
    [{"role": "user", "content": "no order here"}],
    [{"role": "user", "content": [{"type": "image", "source": {}}]}],
])
def test_invalid_requests_are_rejected_by_the_model(world, messages):
    reply = post(world, "/v1/messages", {"model": "m", "max_tokens": 10, "messages": messages})
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert world.audit().model_calls == 0


@pytest.mark.parametrize("kind", ["unknown_tool", "missing_args", "bad_type"])
def test_malformed_reply_fault(world, kind):
    world.inject("malformed_reply", arg=kind)
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    [block] = tool_uses(ask(client, messages))
    if kind == "unknown_tool":
        assert block.name not in {tool["name"] for tool in TOOLS}
    elif kind == "missing_args":
        assert block.name == "charge_card"
        assert set(block.input) < {"order_id", "amount"}
    else:
        assert block.name == "charge_card"
        assert not isinstance(block.input["order_id"], str)
    [normal] = tool_uses(ask(client, messages))  # the fault fires once
    assert (normal.name, normal.input) == ("charge_card", CHARGE)


def test_parallel_tool_use_asks_for_the_independent_steps_in_one_reply(world):
    """Armed, the model asks for the charge and the reservation in one reply (two tool_use blocks, ids of their
    own), then for the confirmation alone once both are answered, then finishes: three model calls, not four."""
    world.inject("parallel_tool_use", times=10)
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    first = ask(client, messages)
    both = tool_uses(first)
    assert [(b.name, b.input) for b in both] == [("charge_card", CHARGE), ("reserve_item", {"order_id": ORDER_ID, "sku": SKU})]
    assert len({b.id for b in both}) == 2
    messages += [{"role": "assistant", "content": as_dicts(first)},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "{}"} for b in both]}]
    second = ask(client, messages)
    assert [b.name for b in tool_uses(second)] == ["send_confirmation"]
    messages += [{"role": "assistant", "content": as_dicts(second)},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_uses(second)[0].id,
                                               "content": "{}"}]}]
    assert ask(client, messages).stop_reason == "end_turn"
    # half answered, the reply is refused as the real API refuses it
    with pytest.raises(anthropic.BadRequestError):
        ask(client, [messages[0], messages[1], {"role": "user", "content": [messages[2]["content"][0]]}])


def test_parallel_tool_use_honours_disable_parallel_tool_use(world):
    """A request whose tool_choice sets disable_parallel_tool_use gets one tool per reply, as from the real API, and
    the armed fault is left for a request that allows it."""
    world.inject("parallel_tool_use", times=1)
    client = sdk(world)
    messages = [{"role": "user", "content": order_task()}]
    one = client.messages.create(model="claude-sonnet-4-5", max_tokens=400, tools=TOOLS, messages=messages,
                                 tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert [b.name for b in tool_uses(one)] == ["charge_card"]
    assert world.faults_left()["parallel_tool_use"] == 1
    assert [b.name for b in tool_uses(ask(client, messages))] == ["charge_card", "reserve_item"]


def test_parallel_tool_use_is_off_unless_armed(world):
    """Unarmed (every lesson), one tool per reply, as before."""
    assert [b.name for b in tool_uses(ask(sdk(world), [{"role": "user", "content": order_task()}]))] == ["charge_card"]


# --- the services --------------------------------------------------------------------------------

@pytest.mark.parametrize("path, body, kind", [
    (CHARGES, CHARGE, "charge"),
    (RESERVATIONS, {"order_id": ORDER_ID, "sku": SKU}, "reservation"),
    (EMAILS, {"order_id": ORDER_ID}, "confirmation"),
])
def test_without_a_key_every_call_is_a_new_effect(world, path, body, kind):
    first, second = post(world, path, body), post(world, path, body)
    assert first.status_code == second.status_code == 200
    assert first.json()["id"] != second.json()["id"]
    assert "Idempotent-Replayed" not in second.headers
    audit = world.audit()
    assert audit.counts[kind] == 2
    assert (audit.duplicates, audit.duplicated) == (1, [kind])
    assert [e["id"] for e in audit.effects[kind]] == [first.json()["id"], second.json()["id"]]
    assert audit.effects[kind][0]["params"] == body


def test_same_key_same_params_replays_the_first_response(world):
    first = post(world, CHARGES, CHARGE, key="k-1")
    second = post(world, CHARGES, CHARGE, key="k-1")
    assert first.status_code == second.status_code == 200
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    [effect] = world.audit().effects["charge"]
    assert effect["id"] == first.json()["id"]
    assert effect["idempotency_key"] == "k-1"


def test_different_keys_are_different_effects(world):
    post(world, CHARGES, CHARGE, key="k-a").raise_for_status()
    post(world, CHARGES, CHARGE, key="k-b").raise_for_status()
    assert world.audit().counts["charge"] == 2


def test_same_key_other_params_is_an_idempotency_error(world):
    first = post(world, CHARGES, CHARGE, key="k-1")
    other = post(world, CHARGES, {"order_id": ORDER_ID, "amount": 1.0}, key="k-1")
    assert first.status_code == 200
    assert other.status_code == 400
    assert other.json()["error"]["type"] == "idempotency_error"
    [effect] = world.audit().effects["charge"]
    assert effect["params"] == CHARGE


def test_same_key_while_in_flight_is_409(world):
    """The second request is sent once the first one's key is seen in flight -- a state, waited for, not a moment
    guessed -- and the first stays in flight long enough for it to arrive, however loaded the machine."""
    world.inject("latency:charge_card", arg=str(IN_FLIGHT_S))
    results = {}

    def call(name):
        results[name] = post(world, CHARGES, CHARGE, key="k-slow")

    slow = threading.Thread(target=call, args=("first",))
    slow.start()
    while not ledger_rows(world, "payments.db", "SELECT key FROM idempotency_keys"):
        assert slow.is_alive(), f"the first request ended before its key was seen: {results}"
        time.sleep(0.02)
    assert ledger_rows(world, "payments.db", "SELECT state FROM idempotency_keys") == [{"state": "in_flight"}]
    call("second")
    slow.join(IN_FLIGHT_S + 30)
    assert results["first"].status_code == 200
    assert results["second"].status_code == 409
    assert results["second"].json()["error"]["type"] == "idempotency_key_in_use"
    [effect] = world.audit().effects["charge"]
    assert effect["id"] == results["first"].json()["id"]
    third = post(world, CHARGES, CHARGE, key="k-slow")  # done now: a replay
    assert third.headers.get("Idempotent-Replayed") == "true"
    assert world.audit().counts["charge"] == 1


def test_lost_ack_commits_the_effect_and_a_keyed_retry_replays_it(world):
    world.inject("lost_ack:charge_card")
    with pytest.raises(httpx.HTTPError):
        post(world, CHARGES, CHARGE, key="k-lost")
    [effect] = world.audit().effects["charge"]  # the effect happened though the client saw nothing
    retry = post(world, CHARGES, CHARGE, key="k-lost")
    assert retry.status_code == 200
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json()["id"] == effect["id"]
    assert world.audit().counts["charge"] == 1
    post(world, CHARGES, CHARGE, key="k-next").raise_for_status()  # the fault fired only once
    assert world.audit().counts["charge"] == 2


def test_lost_ack_then_a_retry_without_a_key_duplicates(world):
    world.inject("lost_ack:send_confirmation")
    with pytest.raises(httpx.HTTPError):
        post(world, EMAILS, {"order_id": ORDER_ID})
    post(world, EMAILS, {"order_id": ORDER_ID}).raise_for_status()
    audit = world.audit()
    assert audit.counts["confirmation"] == 2
    assert audit.duplicated == ["confirmation"]


@pytest.mark.parametrize("body", [
    {"order_id": ORDER_ID},
    {"order_id": ORDER_ID, "amount": True},
    {"order_id": ORDER_ID, "amount": "49.99"},
    {"order_id": 8842, "amount": AMOUNT},
    {"order_id": ORDER_ID, "amount": AMOUNT, "currency": "usd"},
    [ORDER_ID, AMOUNT],
])
def test_services_reject_bad_params_without_an_effect(world, body):
    reply = post(world, CHARGES, body, key="k-bad")
    assert reply.status_code == 400
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert world.audit().counts["charge"] == 0
    # a rejected request does not burn its key
    assert post(world, CHARGES, CHARGE, key="k-bad").status_code == 200


def test_services_reject_an_empty_key_and_bad_json(world):
    empty = post(world, CHARGES, CHARGE, key="")
    assert empty.status_code == 400 and "Idempotency-Key" in empty.json()["error"]["message"]
    garbage = httpx.post(world.url + CHARGES, content=b"{not json", timeout=5)
    assert garbage.status_code == 400
    assert world.audit().counts["charge"] == 0


def test_effects_are_recorded_per_order(world):
    post(world, CHARGES, CHARGE).raise_for_status()
    post(world, CHARGES, {"order_id": "ORD-1", "amount": 5}).raise_for_status()
    assert world.audit().counts["charge"] == 1
    assert world.audit("ORD-1").effects["charge"][0]["params"]["amount"] == 5
    rows = ledger_rows(world, "payments.db", "SELECT order_id FROM effects ORDER BY seq")
    assert [r["order_id"] for r in rows] == [ORDER_ID, "ORD-1"]


# --- the ledgers ---------------------------------------------------------------------------------

def test_audit_reads_the_ledgers_after_the_world_stopped(tmp_path):
    with World.start(tmp_path / "w") as world:
        post(world, CHARGES, CHARGE).raise_for_status()
        post(world, CHARGES, CHARGE).raise_for_status()
    assert not world.is_alive()
    assert world.audit().counts["charge"] == 2


def test_a_corrupt_ledger_raises_ledger_error_naming_the_file(tmp_path):
    with World.start(tmp_path / "w") as world:
        ask(sdk(world), [{"role": "user", "content": order_task()}])
    model_db = world.ledger_dir / "model.db"
    for leftover in (world.ledger_dir / "model.db-wal", world.ledger_dir / "model.db-shm"):
        leftover.unlink(missing_ok=True)
    model_db.write_bytes(b"this is not a database, just garbage bytes " * 100)
    with pytest.raises(LedgerError, match="model.db"):
        world.audit()


def test_a_sqlite_file_that_is_not_a_ledger_raises_ledger_error(tmp_path):
    with World.start(tmp_path / "w") as world:
        pass
    payments = world.ledger_dir / "payments.db"
    payments.unlink()
    sqlite3.connect(payments).close()  # a valid, empty SQLite database
    with pytest.raises(LedgerError, match="payments.db"):
        world.audit()


def test_the_command_line_audit_of_an_order_the_world_never_saw_is_one_line_and_exit_1(tmp_path, capsys):
    """A mistyped id (ORD-8824 for ORD-8842) would otherwise read as an order that never started, exit 0."""
    from crashlab.cli import main

    with World.start(tmp_path / "w") as world:
        post(world, CHARGES, CHARGE).raise_for_status()
    assert main(["audit", "--state", str(tmp_path / "w"), "--order", ORDER_ID]) == 0
    capsys.readouterr()
    assert main(["audit", "--state", str(tmp_path / "w"), "--order", "ORD-8824"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the world in ") and "has no record of order ORD-8824" in err, err
    assert err.count("\n") == 1, err
    assert audit_ledgers(world.ledger_dir, "ORD-8824").verdict == "not started"  # the library still answers


def test_audit_of_a_missing_dir_raises_ledger_error(tmp_path):
    missing = tmp_path / "no-such-world" / "ledgers"
    with pytest.raises(LedgerError, match="does not exist") as caught:
        audit_ledgers(missing, ORDER_ID)
    assert str(missing) in str(caught.value)
    assert not missing.exists()  # a read never creates a ledger


def test_a_refused_call_does_nothing_and_the_world_counts_the_requests_that_met_it(tmp_path):
    from crashlab.agent import ToolCallFailed, call_tool

    with World.start(tmp_path / "w") as world:
        world.inject("refuse:charge_card", times=3, arg="400")
        world.inject("refuse:reserve_item", times=1, arg="503")
        env = world.env()
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            with pytest.raises(ToolCallFailed) as refused:
                call_tool("charge_card", {"order_id": "ORD-8842", "amount": 49.99}, idempotency_key="k1")
            assert refused.value.status == 400 and not refused.value.retryable
            with pytest.raises(ToolCallFailed) as unavailable:
                call_tool("reserve_item", {"order_id": "ORD-8842", "sku": "SKU-772"}, idempotency_key="k2")
            assert unavailable.value.retryable
            assert call_tool("reserve_item", {"order_id": "ORD-8842", "sku": "SKU-772"}, idempotency_key="k2")["object"] \
                == "reservation"
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        assert world.faults_left() == {"refuse:charge_card": 2, "refuse:reserve_item": 0}
        assert world.audit().counts == {"charge": 0, "reservation": 1, "confirmation": 0}
        with pytest.raises(ValueError):
            world.inject("refuse:charge_card", arg="often")


@pytest.mark.parametrize("fault, arg, why", [("lost_ack:charge", None, "unknown fault 'lost_ack:charge'"),
                                             ("lostack:charge_card", None, "unknown fault"),
                                             ("latency:charge_card", "soon", "seconds in flight"),
                                             ("refuse:charge_card", "200", "HTTP error status")])
def test_a_fault_that_could_never_fire_is_refused(world, fault, arg, why):
    """A typo'd fault used to be armed and never fire: the test it was meant for then tested nothing."""
    with pytest.raises(ValueError, match=why):
        world.inject(fault, arg=arg)
    assert world.faults_left() == {}


# --- a flaky world, and stopping a world for certain ----------------------------------------------------------
def test_a_flaky_world_answers_retryable_errors_does_nothing_then_recovers(tmp_path, monkeypatch):
    """``World.flaky``: for a while every service answers 503 and the model 529, nothing is done or recorded;
    the agent's clients call both retryable; then the world recovers by itself, and a restarted world stays
    flaky until the time is up (the end is kept in its control ledger)."""
    from crashlab.agent import ModelCallFailed, ToolCallFailed, call_tool, model_client

    with World.start(tmp_path / "w") as world:
        for name, value in world.env().items():
            monkeypatch.setenv(name, value)
        world.flaky(300.0)  # long enough that a restart on a loaded machine is well inside it; ended by hand below
        with pytest.raises(ToolCallFailed) as tool:
            call_tool("charge_card", CHARGE, idempotency_key="k1")
        with pytest.raises(ModelCallFailed) as model:
            model_client().messages.create(model="m", max_tokens=400, tools=TOOLS,
                                           messages=[{"role": "user", "content": order_task()}])
        assert (tool.value.status, model.value.status) == (503, 529)
        assert tool.value.retryable and model.value.retryable
        assert world.flaky_state()["refused"] == 2
        audit = world.audit()
        assert (audit.counts["charge"], audit.model_calls, audit.rejected_model_calls) == (0, 0, 0)
    with World.start(tmp_path / "w", fresh=False) as again:  # restarted within the period: still flaky
        assert post(again, CHARGES, CHARGE, key="k1").status_code == 503
        assert 0 < again.flaky_state()["seconds_left"] < 300  # counted down from the end kept in the ledger
        again.flaky(0)  # over: as when its time is up
        assert post(again, CHARGES, CHARGE, key="k1").status_code == 200  # the same key works: nothing was claimed
        assert again.audit().counts["charge"] == 1


def test_a_flaky_world_needs_seconds_and_5xx_statuses(world):
    """A 4xx is not retried by a correct agent: a "transient" fault that answered one would test nothing."""
    for kwargs in [{"seconds": -1}, {"seconds": 3600}, {"seconds": "soon"}, {"seconds": 1, "status": 400},
                   {"seconds": 1, "status": 200}, {"seconds": 1, "model_status": 429}]:
        with pytest.raises(ValueError, match="flaky needs"):
            world.flaky(**kwargs)
    assert world.flaky_state()["seconds_left"] == 0


def test_stop_kills_a_server_that_ignores_sigterm_within_its_timeout(tmp_path):
    world = World.start(tmp_path / "w")
    os.kill(world.pid, signal.SIGSTOP)  # a stopped server cannot act on SIGTERM
    started = time.monotonic()
    world.stop(timeout=0.5)  # without the SIGKILL after the timeout, the stopped server would stay
    print(f"a server that ignores SIGTERM was stopped in {time.monotonic() - started:.1f} s (timeout 0.5 s)")
    assert not pid_running(world.pid)
    in_its_group = [p for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == world.pid]
    assert in_its_group == []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_a_world_is_alive_only_if_its_own_pid_answers(world):
    assert world.is_alive()
    impostor = World(world.state_dir, world.port, world.pid + 1)  # the port answers, with another pid
    assert not impostor.is_alive()
    impostor.stop()  # signals nothing, removes nothing: its pid does not answer
    assert world.is_alive() and World.attach(world.state_dir).pid == world.pid


def test_a_hold_keeps_the_orders_next_requests_until_released_and_lets_others_by(world):
    """``hold:TOOL``: the effect's own reply leaves, then the order's next requests -- a tool's and the model's --
    wait in the world until it is released, however long whoever releases it takes to look; another order's
    requests go by. A soak directs a fault at "right after the charge" this way (test_soak's directed faults)."""
    from concurrent.futures import ThreadPoolExecutor

    world.inject("hold:charge_card", order_id=ORDER_ID)
    assert post(world, CHARGES, CHARGE, key="k-held").status_code == 200  # the held effect's reply is not held
    with ThreadPoolExecutor(2) as pool:
        reserve = pool.submit(httpx.post, world.url + RESERVATIONS, json={"order_id": ORDER_ID, "sku": SKU},
                              headers={"Idempotency-Key": "k-r"}, timeout=90)
        model = pool.submit(ask, anthropic.Anthropic(base_url=world.url, api_key="x", max_retries=0, timeout=90),
                            [{"role": "user", "content": order_task()}])
        while world.held_requests() < 2:  # both are in the world, waiting: nothing of them is done
            assert not reserve.done() and not model.done()
            time.sleep(0.05)
        other = {"order_id": "ORD-77", "amount": AMOUNT}
        assert post(world, CHARGES, other, key="k-other").status_code == 200  # another order goes by
        assert world.audit().counts.get("reservation", 0) == 0 and world.audit().model_calls == 0
        world.flaky(30)  # what a soak's directed flaky spell does: the world flaky first, then the order goes on
        world.release_held(ORDER_ID)
        assert reserve.result().status_code == 503, "a held request is handled when it goes on, not before"
        with pytest.raises(anthropic.APIStatusError) as raised:
            model.result()
        assert raised.value.status_code == 529
    world.flaky(0)
    assert world.held_requests() == 0
    assert post(world, RESERVATIONS, {"order_id": ORDER_ID, "sku": SKU}, key="k-r2").status_code == 200  # fired once
