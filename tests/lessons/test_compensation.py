"""The groundwork of the compensation lesson: steps that fail for good, undo tools with keys of their own, the
audit's net state and verdict, a key lifetime, and the crash matrix through the failure path.

Cheap on purpose: the model's choices and the audit's verdicts are checked without a world, the services with
one world per module, and only two matrices run agents, both as the lesson's master writes them (the saga on the
log through every point of the failure path, its unkeyed twin at the one point where it refunds twice).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import httpx
import pytest

from crashlab import agent
from crashlab.world.audit import Audit
from crashlab.harness import BASELINE, Matrix, Row, crash_test, double_crash_pairs, judge, resolve_points
from crashlab.crash_points import allowed_repeats, check_crash_point, failure_points
from crashlab.order import (ALL_TOOLS, COMPENSATION_TOOLS, ORDER_ID, TOOLS, TOOLS_WITH_UNDO, check_failure, failure_path,
                            order_task, undo_request, undo_task)
from crashlab.world import World, WorldError, policy
from master_files import write_master_files

MASTER = Path(__file__).resolve().parents[2] / "solutions" / "07_compensation.ipynb"


# --- the tools: today's list untouched, the undo tools beside it -----------------------------------------------
def test_the_tools_every_lesson_sends_are_unchanged():
    assert hashlib.sha256(json.dumps(TOOLS).encode()).hexdigest() == \
        "28551e080f51e1045f08534fc191ce421f9be4ad5070abb9a28e24836a7a0aa0"
    assert TOOLS_WITH_UNDO == TOOLS + COMPENSATION_TOOLS
    assert [t["name"] for t in COMPENSATION_TOOLS] == ["refund_charge", "release_item", "send_cancellation"]


# --- the model: undoes only when offered the undo tools ----------------------------------------------------------
def converse(task: str, tools: list[dict], fails: str | None = None, turns: int = 10) -> tuple[list[str], str]:
    """Run the world's model on its own: every tool succeeds but ``fails``, which reports a permanent failure."""
    messages = [{"role": "user", "content": task}]
    called = []
    for n in range(turns):
        reply = policy.reply({"messages": messages, "tools": tools})
        if reply["stop_reason"] == "end_turn":
            return called, reply["content"][0]["text"]
        use = reply["content"][1]
        called.append(use["name"])
        messages.append({"role": "assistant", "content": reply["content"]})
        error = use["name"] == fails
        content = f"{fails}: the service answered 422 (out_of_stock: failed for good)" if error else "{}"
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                      "content": content, "is_error": error}]})
    return called, ""


def test_offered_todays_tools_the_model_behaves_as_it_always_has():
    assert converse(order_task(), TOOLS) == (["charge_card", "reserve_item", "send_confirmation"], converse(
        order_task(), TOOLS_WITH_UNDO)[1])
    called, final = converse(order_task(), TOOLS, fails="reserve_item", turns=5)
    assert called == ["charge_card"] + ["reserve_item"] * 4 and final == ""  # it asks for the failed step again
    called, _ = converse(undo_task(), TOOLS, turns=4)
    assert called == ["charge_card", "reserve_item", "send_confirmation"]


@pytest.mark.parametrize("fails, undo", [
    ("charge_card", ["send_cancellation"]),
    ("reserve_item", ["refund_charge", "send_cancellation"]),
    ("send_confirmation", ["release_item", "refund_charge", "send_cancellation"]),
])
def test_offered_the_undo_tools_the_model_undoes_what_succeeded_in_reverse_order(fails, undo):
    reasons = {"charge_card": "card_declined", "reserve_item": "out_of_stock", "send_confirmation": "address_rejected"}
    messages = [{"role": "user", "content": order_task()}]
    called = []
    for _ in range(8):
        reply = policy.reply({"messages": messages, "tools": TOOLS_WITH_UNDO})
        if reply["stop_reason"] == "end_turn":
            break
        use = reply["content"][1]
        called.append(use["name"])
        error = use["name"] == fails
        messages += [{"role": "assistant", "content": reply["content"]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "is_error": error,
                                                   "content": f"failed ({reasons[fails]})" if error else "{}"}]}]
    do, expected_undo = failure_path(fails)
    assert called == do + undo and undo == expected_undo
    text = reply["content"][0]["text"]
    assert f"could not be completed ({fails} failed: {reasons[fails]})" in text and "cancellation was sent" in text


def test_the_model_undoes_an_order_when_the_task_or_a_later_message_says_so():
    called, final = converse(undo_task(), TOOLS_WITH_UNDO)
    assert called == ["release_item", "refund_charge", "send_cancellation"] and "was cancelled" in final
    messages = [{"role": "user", "content": order_task()}]
    for _ in range(4):  # the whole order, then the customer cancels it
        reply = policy.reply({"messages": messages, "tools": TOOLS_WITH_UNDO})
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] == "tool_use":
            messages.append({"role": "user", "content": [{"type": "tool_result", "content": "{}",
                                                          "tool_use_id": reply["content"][1]["id"]}]})
    messages.append({"role": "user", "content": undo_request()})
    reply = policy.reply({"messages": messages, "tools": TOOLS_WITH_UNDO})
    assert reply["content"][1]["name"] == "release_item" and reply["content"][1]["input"]["sku"] == "SKU-772"


# --- failures, points, pairs: one-line errors ----------------------------------------------------------------------
def test_failures_and_the_points_of_their_path():
    assert check_failure("reserve_item") == check_failure("out_of_stock") == ("reserve_item", "out_of_stock")
    assert check_failure("charge_card:card_declined") == ("charge_card", "card_declined")
    for bad, why in [("refund_charge", "no permanent failure"), ("charge_card:out_of_stock", "fails with"),
                     ("nonsense", "no permanent failure")]:
        with pytest.raises(ValueError, match=why) as info:
            check_failure(bad)
        assert "\n" not in str(info.value)
    assert failure_points("reserve_item") == [
        "before:model#1", "after:model#1", "before:charge_card", "after:charge_card", "before:model#2",
        "after:model#2", "before:reserve_item", "after:reserve_item", "before:refund_charge", "after:refund_charge",
        "before:send_cancellation", "after:send_cancellation"]
    assert len(failure_points("send_confirmation")) == 18 and resolve_points("all", "send_confirmation")[-1] == \
        "after:send_cancellation"
    assert all(check_crash_point(f"before:{tool}") for tool in ALL_TOOLS)
    with pytest.raises(ValueError, match="did you mean after:refund_charge"):
        check_crash_point("after:refund_charg")
    pairs = double_crash_pairs(None, fail="reserve_item")
    assert ("after:model#1", "after:refund_charge") in pairs and ("after:reserve_item", "after:send_cancellation") in pairs
    assert not any(first.startswith("after:model#3") for first, _ in pairs)


# --- the audit: net state and verdict; unchanged for an order never undone ------------------------------------------
def audit_of(**n) -> Audit:
    kinds = {"charge": {"amount": 49.99}, "reservation": {"sku": "SKU-772"}, "confirmation": {},
             "refund": {"amount": 49.99}, "release": {"sku": "SKU-772"}, "cancellation": {}}
    effects = {kind: [{"params": params}] * n.get(kind, 0) for kind, params in kinds.items()}
    return Audit(ORDER_ID, effects=effects, model_calls=3)


@pytest.mark.parametrize("effects, verdict, finding", [
    ({}, "not started", None),
    ({"charge": 1, "reservation": 1, "confirmation": 1}, "completed", None),
    ({"charge": 2, "reservation": 1, "confirmation": 1, "refund": 1}, "completed", None),  # a duplicate refunded
    ({"charge": 1, "refund": 1, "cancellation": 1}, "cleanly undone", None),
    ({"cancellation": 1}, "cleanly undone", None),
    ({"charge": 1, "reservation": 1, "release": 1, "refund": 1, "confirmation": 1, "cancellation": 1}, "cleanly undone",
     None),
    ({"charge": 1}, "inconsistent", "money taken and no goods"),
    ({"reservation": 1, "cancellation": 1}, "inconsistent", "goods held and no money"),
    ({"refund": 1, "cancellation": 1}, "inconsistent", "a refund without a charge"),
    ({"charge": 1, "refund": 2, "cancellation": 1}, "inconsistent", "2 refunds for 1 charge (a double refund)"),
    ({"charge": 1, "reservation": 1, "release": 2, "refund": 1, "cancellation": 1}, "inconsistent", "2 releases"),
    ({"charge": 1, "refund": 1}, "inconsistent", "no cancellation sent"),
    ({"charge": 1, "reservation": 1, "confirmation": 1, "cancellation": 1}, "inconsistent", "a cancellation sent"),
    ({"charge": 2, "reservation": 1, "confirmation": 1}, "inconsistent", "$99.98 charged net for a $49.99 order"),
])
def test_the_audit_judges_the_net_state(effects, verdict, finding):
    audit = audit_of(**effects)
    assert audit.verdict == verdict
    assert (finding is None) == (not audit.inconsistencies)
    assert finding is None or any(finding in line for line in audit.inconsistencies), audit.inconsistencies
    assert Audit.from_json(json.loads(json.dumps(audit.as_json()))).verdict == verdict


def test_an_order_never_undone_is_reported_as_before():
    audit = audit_of(charge=1, reservation=1, confirmation=2)
    assert audit.counts == {"charge": 1, "reservation": 1, "confirmation": 2}
    assert str(audit) == ("audit of ORD-8842: charge x1, reservation x1, confirmation x2; model calls 3 (repeated 0); "
                          "finished False -- 2 confirmations (1 duplicate); not finished (the model never gave its "
                          "final answer)")
    assert set(audit.as_dict()) == {"order_id", "effects", "duplicates", "model_calls", "repeated_model_calls",
                                    "rejected_model_calls", "finished"}
    undone = audit_of(charge=1, refund=2, cancellation=1)
    assert undone.counts == {"charge": 1, "reservation": 0, "confirmation": 0, "refund": 2, "cancellation": 1}
    assert undone.duplicates == 1 and undone.missing == ["reservation", "confirmation"]
    assert str(undone).startswith("audit of ORD-8842: charge x1, reservation x0, confirmation x0, refund x2, "
                                  "cancellation x1; net: charged -$49.99, reserved 0; model calls 3 (repeated 0); "
                                  "inconsistent -- 2 refunds (1 duplicate); 2 refunds for 1 charge")
    assert undone.as_dict()["net"] == {"charged": -49.99, "reserved": 0, "confirmations": 0, "cancellations": 1}


def test_judge_and_table_through_the_failure_path():
    undone, run = audit_of(charge=1, refund=1, cancellation=1), None
    assert judge("after:refund_charge", undone, True, run, "durable", "reserve_item") == []
    problems = judge("after:refund_charge", audit_of(charge=1, refund=2, cancellation=1), True, run, "durable",
                     "reserve_item")
    assert any("2 refunds (1 duplicate)" in p for p in problems)
    assert any("not cleanly undone (inconsistent: 2 refunds for 1 charge" in p for p in problems)
    done = judge(BASELINE, audit_of(charge=1, reservation=1, confirmation=1), True, run, "durable", "reserve_item")
    assert done == [f"{BASELINE}: the order was not cleanly undone (completed: reserve_item failed for good, yet the "
                    "order completed)"]
    row = Row(BASELINE, True, undone.counts, 0, 2, 0, True, 1.0, verdict="cleanly undone")
    matrix = Matrix("agent.py", ORDER_ID, "durable", [row], 1.0, fail="reserve_item:out_of_stock")
    assert "outcome" in matrix.table() and "cleanly undone" in matrix.table() and "failing for good" in str(matrix)
    assert matrix.as_dict()["fail"] == "reserve_item:out_of_stock" and matrix.as_dict()["rows"][0]["verdict"]
    assert "verdict" not in Row(BASELINE, True, {}, 0, 4, 0, True, None).as_dict()


# --- the world: permanent failures, undo services, key lifetime -----------------------------------------------------
def test_a_step_fails_for_good_for_one_order_only_and_is_not_retryable(world_env):
    world = world_env
    world.fail_permanently("ORD-101", "reserve_item")
    assert {"order_id": "ORD-101", "tool": "reserve_item", "reason": "out_of_stock"} in world.permanent_failures()
    agent.charge_card("ORD-101", 49.99, idempotency_key="ORD-101:1")
    for _ in range(2):  # the same answer, replayed under its key
        with pytest.raises(agent.ToolCallFailed) as info:
            agent.reserve_item("ORD-101", "SKU-772", idempotency_key="ORD-101:2")
        assert (info.value.status, info.value.error_type, info.value.permanent, info.value.retryable) == \
            (422, "out_of_stock", True, False)
    assert agent.reserve_item("ORD-102", "SKU-772")["status"] == "succeeded"  # another order is not affected
    world.clear_failure("ORD-101", "reserve_item")
    with pytest.raises(agent.ToolCallFailed, match="out_of_stock"):  # a key keeps its answer, as at a provider
        agent.reserve_item("ORD-101", "SKU-772", idempotency_key="ORD-101:2")
    assert agent.reserve_item("ORD-101", "SKU-772", idempotency_key="ORD-101:2b")["status"] == "succeeded"
    assert world.audit("ORD-101").counts == {"charge": 1, "reservation": 1, "confirmation": 0}
    assert [c["amount"] for c in agent.list_charges("ORD-101")] == [49.99] and agent.list_charges("ORD-9") == []
    # what a saga reads before it undoes a step whose outcome it never heard: the reservation the failure did not make
    assert [r["sku"] for r in agent.list_reservations("ORD-101")] == ["SKU-772"]
    assert agent.list_reservations("ORD-9") == [] and agent.list_reservations("ORD-102")[0]["object"] == "reservation"


def test_bad_failures_and_key_lifetimes_are_one_line_errors(world):
    for call, why in [(lambda: world.fail_permanently("8842", "reserve_item"), "order id"),
                      (lambda: world.fail_permanently("ORD-1", "refund_charge"), "no permanent failure"),
                      (lambda: world.fail_permanently("ORD-1", "charge_card", "out_of_stock"), "fails with"),
                      (lambda: world.clear_failure("ORD-1", "nope"), "can fail for good")]:
        with pytest.raises(ValueError, match=why) as info:
            call()
        assert "\n" not in str(info.value)
    reply = httpx.post(f"{world.url}/_admin/failures", headers={"X-Crashlab-Admin": world._token}, timeout=10,
                       json={"order_id": "ORD-1", "tool": "charge_card", "reason": "nope"})
    assert reply.status_code == 400 and "card_declined" in reply.json()["error"]["message"]
    for lifetime in (0, -1, "1", True, float("inf")):
        with pytest.raises(WorldError, match="key_lifetime"):
            World.start(key_lifetime=lifetime)


def test_undo_services_have_keys_of_their_own(world_env):
    order = "ORD-103"
    agent.charge_card(order, 49.99, idempotency_key=f"{order}:1")
    first = agent.refund_charge(order, 49.99, idempotency_key=f"{order}:undo:refund_charge")
    again = agent.refund_charge(order, 49.99, idempotency_key=f"{order}:undo:refund_charge")
    assert again["replayed"] and again["id"] == first["id"] and first["object"] == "refund"
    agent.send_cancellation(order, idempotency_key=f"{order}:undo:send_cancellation")
    assert world_env.audit(order).verdict == "cleanly undone"
    agent.refund_charge(order, 49.99)  # no key: a second refund
    audit = world_env.audit(order)
    assert audit.verdict == "inconsistent" and audit.counts["refund"] == 2 and audit.duplicates == 1


def test_the_model_decides_to_undo_when_offered_the_tools(world_env):
    """Who decides, the model: told "out of stock", it picks the refund and the cancellation itself."""
    order = "ORD-104"
    world_env.fail_permanently(order, "out_of_stock")
    client, messages = agent.model_client(), [{"role": "user", "content": order_task(order)}]
    for _ in range(6):
        reply = client.messages.create(model=agent.MODEL, max_tokens=400, tools=TOOLS_WITH_UNDO, messages=messages)
        content = agent.content_to_dicts(reply.content)
        messages.append({"role": "assistant", "content": content})
        if reply.stop_reason != "tool_use":
            break
        use = agent.first_tool_use(content)
        try:
            messages.append(agent.tool_result_message(use["id"], agent.call_tool(use["name"], use["input"])))
        except agent.ToolCallFailed as exc:
            assert exc.permanent
            messages.append(agent.tool_error_message(use["id"], exc))
    audit = world_env.audit(order)
    assert (audit.verdict, audit.model_calls, audit.final_answer_served) == ("cleanly undone", 5, True)
    assert "has been undone" in content[0]["text"]


def test_a_key_older_than_its_lifetime_is_forgotten(tmp_path, monkeypatch):
    with World.start(tmp_path / "world", key_lifetime=0.5) as world:
        for key, value in world.env().items():
            monkeypatch.setenv(key, value)
        first = agent.charge_card(ORDER_ID, 49.99, idempotency_key="ORD-8842:1")
        assert agent.charge_card(ORDER_ID, 49.99, idempotency_key="ORD-8842:1")["id"] == first["id"]
        time.sleep(0.6)
        second = agent.charge_card(ORDER_ID, 49.99, idempotency_key="ORD-8842:1")  # the trap: a second charge
        assert "replayed" not in second and second["id"] != first["id"]
        assert world.audit().counts["charge"] == 2 and len(agent.list_charges(ORDER_ID)) == 2


# --- the crash matrix through the failure path --------------------------------------------------------------------
@pytest.fixture(scope="module")
def lesson_agents(tmp_path_factory) -> Path:
    """The compensation lesson's files as its master writes them: the saga on the log (compensating_agent.py)
    and its unkeyed twin (naive_compensating_agent.py)."""
    folder = tmp_path_factory.mktemp("lesson-agents")
    write_master_files(MASTER, folder)
    return folder


def test_the_keyed_compensating_agent_is_clean_at_every_point_of_the_failure_path(launcher, lesson_agents):
    matrix = crash_test(lesson_agents / "compensating_agent.py", "all", fail="send_confirmation", progress=False, launcher=launcher)
    assert matrix.ok, str(matrix)
    assert [row.point for row in matrix.rows] == [BASELINE] + failure_points("send_confirmation")
    assert all(row.verdict == "cleanly undone" and row.duplicates == 0 and row.finished for row in matrix.rows)
    assert all(row.repeated_model_calls == allowed_repeats(row.point) for row in matrix.rows)


def test_the_naive_compensating_agent_refunds_twice_after_a_crash(launcher, lesson_agents):
    matrix = crash_test(lesson_agents / "naive_compensating_agent.py", "after:refund_charge", fail="reserve_item", baseline=False, progress=False,
                        launcher=launcher)
    row = matrix.rows[0]
    assert not matrix.ok and row.verdict == "inconsistent" and row.effects["refund"] == 2 and row.duplicates == 1
    assert any("a double refund" in problem for problem in row.problems), row.problems


def test_world_start_takes_a_key_lifetime(capsys):
    from crashlab.cli import build_parser

    assert build_parser().parse_args(["world", "start", "--key-lifetime", "86400"]).key_lifetime == 86400
    assert build_parser().parse_args(["world", "start"]).key_lifetime is None  # never forget, as before
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["world", "start", "--key-lifetime", "0"])
    error = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in error and "--key-lifetime" in error


def test_a_resume_after_the_key_lifetime_charges_again_when_keys_are_all_an_agent_has(tmp_path, launcher,
                                                                                       lesson_agents):
    """The key-lifetime trap, under the harness: the world forgets a key 1 s after its first use and the resume
    comes after that, so an agent that relies on its keys alone charges a second time."""
    keyed = lesson_agents / "compensating_agent.py"
    matrix = crash_test(keyed, ["after:charge_card"], expect="durable", key_lifetime=1.0, progress=False,
                        workdir=tmp_path, launcher=launcher)
    baseline, row = matrix.rows
    assert baseline.ok, baseline.problems  # no crash, no wait: the key never expires within the run
    assert row.effects["charge"] == 2 and row.duplicates == 1 and not row.ok, row.problems
    assert matrix.as_dict()["key_lifetime"] == 1.0 and "forgotten 1 s after first use" in str(matrix)
    with pytest.raises(ValueError, match="key_lifetime"):
        crash_test(keyed, ["after:charge_card"], key_lifetime=0, progress=False)
