"""The long task in the world: backlog ids and their plan, the scripted model driving a plain loop through a short
backlog to a clean audit, a summary that is never the final answer, receipts replayed byte for byte under their key,
and the backlog audit's words for orders lost and stuck. One world for the module (receipts of RESULT_BYTES
characters); each test works on a backlog of its own (a tag keeps them apart), judged from the world's ledgers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from crashlab.backlog import (SUMMARY_ASK, Step, backlog_id, backlog_of, backlog_orders, backlog_task, backlog_turns,
                              check_backlog, is_backlog, plan, progress_in, progress_line, step_input, task_for)
from crashlab.harness import run_agent
from crashlab.order import AMOUNT, SKU, TOOL_ORDER, TOOLS, order_details, order_task
from crashlab.world import World
from crashlab.world.backlog_audit import BacklogAudit, backlog_audit
from crashlab.world.ledger import PACK_ABOVE, packed_request, request_text

AGENT = Path(__file__).resolve().parents[1] / "agents" / "backlog_agent.py"
RESULT_BYTES = 150


@pytest.fixture(scope="module")
def long_world(tmp_path_factory):
    with World.start(tmp_path_factory.mktemp("backlog") / "world", result_bytes=RESULT_BYTES) as world:
        yield world


def ask(world: World, messages: list[dict], tools: list | None = TOOLS) -> httpx.Response:
    body = {"model": "m", "max_tokens": 100, "messages": messages} | ({"tools": tools} if tools else {})
    return httpx.post(f"{world.url}/v1/messages", json=body, timeout=30)


def tool(world: World, step: Step, key: str | None = None) -> httpx.Response:
    path = {"charge_card": "/payments/charges", "reserve_item": "/inventory/reservations",
            "send_confirmation": "/email/messages"}[step.tool]
    return httpx.post(world.url + path, json=step_input(step), headers={"Idempotency-Key": key} if key else {},
                      timeout=30)


def test_a_backlog_id_names_its_orders_and_its_plan():
    assert backlog_id(3) == "ORD-BL-003" and backlog_id(34, "B") == "ORD-BL-034-B"
    assert backlog_orders("ORD-BL-003") == ["ORD-BL-003-001", "ORD-BL-003-002", "ORD-BL-003-003"]
    assert backlog_orders("ORD-BL-002-B") == ["ORD-BL-002-B-001", "ORD-BL-002-B-002"]
    assert backlog_of("ORD-BL-034-017") == "ORD-BL-034" and backlog_of("ORD-BL-002-B-002") == "ORD-BL-002-B"
    assert backlog_of("ORD-BL-003-004") is None and backlog_of("ORD-BL-003") is None and backlog_of("ORD-8842") is None
    assert is_backlog("ORD-BL-034") and not is_backlog("ORD-BL-000") and not is_backlog("ORD-BL-034-001")
    steps = plan("ORD-BL-002")
    assert len(steps) == backlog_turns("ORD-BL-002") == 6
    assert steps[:4] == [Step("ORD-BL-002-001", tool) for tool in TOOL_ORDER] + [Step("ORD-BL-002-002", "charge_card")]
    details = {order_details(order) for order in backlog_orders("ORD-BL-040")}
    assert len(details) > 30 and all(amount != AMOUNT and sku != SKU for amount, sku in details)
    assert order_details("ORD-BL-040-007") == order_details("ORD-BL-040-007")  # from the id: every process agrees
    assert step_input(Step("ORD-BL-002-001", "charge_card"))["amount"] == order_details("ORD-BL-002-001")[0]
    assert "backlog ORD-BL-002: 2 orders" in backlog_task("ORD-BL-002") and task_for("ORD-BL-002") == backlog_task("ORD-BL-002")
    assert task_for("ORD-8842") == order_task("ORD-8842")
    line = progress_line("ORD-BL-002", 4)
    assert line == "[progress ORD-BL-002] 4 of 6 steps done" and progress_in(f"so far: {line}", "ORD-BL-002") == 4
    assert progress_in(line, "ORD-BL-002-B") is None
    for bad in (lambda: backlog_id(0), lambda: backlog_id(3, "b"), lambda: check_backlog("ORD-8842"),
                lambda: progress_line("ORD-BL-002", 7)):
        with pytest.raises(ValueError):
            bad()


def test_a_plain_loop_works_through_a_backlog_to_a_clean_audit(long_world):
    run = run_agent(AGENT, long_world, "ORD-BL-003", timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Backlog ORD-BL-003 is complete" in run.stdout
    audit = long_world.audit("ORD-BL-003")  # one admin request: the backlog's form
    assert isinstance(audit, BacklogAudit)
    assert (len(audit.complete), audit.lost, audit.stuck, audit.duplicates) == (3, [], {}, 0)
    assert (audit.model_calls, audit.repeated_model_calls, audit.summaries) == (10, 0, 0) and audit.turns == 10
    assert audit.finished and audit.describe_problems() == [] and audit.counts == dict.fromkeys(
        ("charge", "reservation", "confirmation"), 3)
    amounts = sorted(e["params"]["amount"] for e in audit.effects["charge"])
    assert amounts == sorted(order_details(order)[0] for order in backlog_orders("ORD-BL-003"))
    # the audit reads the hash, status and stop reason; the request is kept, a long one compressed
    with sqlite3.connect(long_world.ledger_dir / "model.db") as conn:
        kept = conn.execute("SELECT request FROM calls WHERE order_id = 'ORD-BL-003' ORDER BY seq DESC").fetchone()[0]
    assert json.loads(request_text(kept))[0]["content"][0]["text"] == backlog_task("ORD-BL-003")
    long_request = json.dumps([{"role": "user", "content": "x" * PACK_ABOVE}])
    assert isinstance(packed_request(long_request), bytes) and len(packed_request(long_request)) < PACK_ABOVE // 10
    assert request_text(packed_request(long_request)) == long_request and packed_request(kept) == kept
    assert backlog_audit(long_world.ledger_dir, "ORD-BL-003").as_dict() == audit.as_dict()  # from the files alike


def test_a_summary_answers_the_progress_line_and_is_never_the_final_answer(long_world):
    backlog, steps = "ORD-BL-002-S", plan("ORD-BL-002-S")
    messages: list[dict] = [{"role": "user", "content": backlog_task(backlog)}]
    for step in steps:  # every step done, as the model asks
        reply = ask(long_world, messages).json()
        call = reply["content"][1]
        assert reply["stop_reason"] == "tool_use" and (call["input"]["order_id"], call["name"]) == step
        assert tool(long_world, step, f"{step.order_id}/{step.tool}").status_code == 200
        messages += [{"role": "assistant", "content": reply["content"]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "ok"}]}]
    summary = messages[:-1] + [{"role": "user", "content": messages[-1]["content"] + [{"type": "text",
                                                                                       "text": SUMMARY_ASK}]}]
    refused = ask(long_world, summary)  # a summary offers no tools
    assert refused.status_code == 400 and "offers no tools" in refused.json()["error"]["message"]
    reply = ask(long_world, summary, tools=None).json()
    assert reply["stop_reason"] == "end_turn" and reply["content"] == [{"type": "text",
                                                                        "text": progress_line(backlog, 6)}]
    audit = long_world.audit(backlog)
    assert len(audit.complete) == 2 and audit.summaries == 1 and not audit.final_answer_served and not audit.finished
    assert audit.describe_problems() == ["not finished (the model never gave its final answer)"]
    # a compacted conversation carries the line alone: the model knows it is done
    final = ask(long_world, [{"role": "user", "content": f"{backlog_task(backlog)}\n\n{reply['content'][0]['text']}"}])
    assert final.json()["stop_reason"] == "end_turn" and long_world.audit(backlog).finished


def test_receipts_are_replayed_byte_for_byte_and_only_a_backlog_order_has_one(long_world):
    step = Step("ORD-BL-001-R-001", "charge_card")
    first, again = tool(long_world, step, "receipt-key"), tool(long_world, step, "receipt-key")
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert first.content == again.content and len(first.json()["receipt"]) == RESULT_BYTES
    plain = httpx.post(f"{long_world.url}/payments/charges", json={"order_id": "ORD-77", "amount": AMOUNT}, timeout=30)
    assert plain.status_code == 200 and "receipt" not in plain.json()


def test_the_backlog_audit_names_orders_lost_and_stuck(long_world):
    backlog = "ORD-BL-003-W"
    first, second, _ = backlog_orders(backlog)
    for step in plan(backlog)[:4]:  # the first order whole, the second charged
        tool(long_world, step)
    tool(long_world, Step(first, "send_confirmation"))  # a second confirmation: a duplicate
    audit = long_world.audit(backlog)
    assert audit.complete == [first] and audit.stuck == {second: ["reservation", "confirmation"]}
    assert audit.lost == [f"{backlog}-003"] and audit.duplicates == 1 and not audit.finished
    assert audit.describe_problems() == [f"{first}: 2 confirmations (1 duplicate)", f"1 order never started ({backlog}-003)",
                                         f"{second}: charged, no reservation, no confirmation"]
    tool(long_world, Step(second, "send_confirmation"))
    assert long_world.audit(backlog).stuck_words() == [f"{second}: charged and confirmed, no reservation"]
    assert "1 stuck, 1 lost" in str(long_world.audit(backlog))
