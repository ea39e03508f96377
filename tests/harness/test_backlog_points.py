"""Crash points of the long task, through the real harness: ``TOOL#N`` and ``turn#N`` kill the run at the request
they name (SIGKILL, then a resume in a new process), judged from the world's ledgers; :func:`boundary_points` is the
plan of a real run that compacts every few turns, checked against the world's model ledger; a summary's answer lost
in flight costs exactly the one repeat a crash at ``after:model#N`` is allowed. One world for the module, a backlog
of its own per test (a tag keeps them apart), two or three orders each."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from crashlab.backlog import backlog_orders, backlog_turns, plan
from crashlab.crash_points import BASELINE, CrashPoint, boundary_points
from crashlab.harness import crash_row, run_agent
from crashlab.harness.verdicts import judge
from crashlab.world import World

AGENT = Path(__file__).resolve().parents[1] / "agents" / "backlog_agent.py"
PERIOD = 2  # the agent compacts its conversation every PERIOD tool turns (CRASHLAB_TEST_COMPACT)


@pytest.fixture(scope="module")
def long_world(tmp_path_factory):
    with World.start(tmp_path_factory.mktemp("points") / "world") as world:
        yield world


def effects_in_order(world: World, backlog: str) -> list[tuple[str, str]]:
    """(order, kind) of every effect of the backlog, in the order the world committed them."""
    return [(e["order_id"], e["kind"]) for e in sorted(
        (e for kind in world.audit(backlog).effects.values() for e in kind), key=lambda e: e["at"])]


@pytest.mark.parametrize("point, backlog, committed", [
    # the 2nd charge of the run is the 2nd order's: killed once it committed, before its reply
    ("after:charge_card#2", "ORD-BL-003-T", 4),
    # turn 5 is the 2nd order's reservation: killed on its arrival, nothing of it committed
    ("before:turn#5", "ORD-BL-003-U", 4),
])
def test_a_numbered_point_kills_the_run_at_the_request_it_names(long_world, point, backlog, committed):
    crashed = run_agent(AGENT, long_world, backlog, crash_at=point, timeout=120)
    assert crashed.crashed_at == point and crashed.killed, crashed.stderr
    kinds = {"charge_card": "charge", "reserve_item": "reservation", "send_confirmation": "confirmation"}
    assert effects_in_order(long_world, backlog) == [(step.order_id, kinds[step.tool]) for step in plan(backlog)[:committed]]
    audit = long_world.audit(backlog)
    assert audit.lost == [backlog_orders(backlog)[2]] and list(audit.stuck) == [backlog_orders(backlog)[1]]
    left = f"1 order never started ({backlog_orders(backlog)[2]}); {backlog_orders(backlog)[1]}: charged, no reservation"
    assert f"{point}: the order did not finish ({left}, no confirmation)" in judge(point, audit, True, None, "durable")
    resumed = run_agent(AGENT, long_world, backlog, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    audit = long_world.audit(backlog)
    assert audit.finished and audit.duplicates == 0 and audit.repeated_model_calls == 0, audit
    assert judge(point, audit, True, resumed, "durable") == []


def test_boundary_points_are_the_plan_of_a_run_that_compacts(long_world):
    backlog = "ORD-BL-002-P"
    run = run_agent(AGENT, long_world, backlog, extra_env={"CRASHLAB_TEST_COMPACT": str(PERIOD)}, timeout=120)
    assert run.returncode == 0, run.stderr
    audit = long_world.audit(backlog)
    turns = backlog_turns(backlog)
    assert audit.finished and audit.summaries == (turns - 1) // PERIOD and audit.model_calls == audit.turns
    with sqlite3.connect(long_world.ledger_dir / "model.db") as conn:
        calls = conn.execute("SELECT summary, reply FROM calls WHERE order_id = ? AND status = 200 ORDER BY seq",
                             (backlog,)).fetchall()
    points = [CrashPoint.parse(p) for p in boundary_points(turns, PERIOD)]
    summaries = {p.call for p in points if p.is_model_call and p.when == "after"
                 and not any(q.call == p.call and q.when == "before" for q in points if q.is_model_call)}
    assert summaries == {n for n, (summary, _) in enumerate(calls, 1) if summary}
    tool_calls = [block for _, reply in calls for block in json.loads(reply)["content"] if block["type"] == "tool_use"]
    new_runs = sorted(p.call for p in points if p.is_model_call and p.when == "before")
    assert len(new_runs) == len(summaries)
    for j, call in enumerate(new_runs, 1):  # the first model call of a new run: right after a summary, the next turn
        assert calls[call - 2][0] == 1
        picked = json.loads(calls[call - 1][1])["content"][1]
        assert (picked["input"]["order_id"], picked["name"]) == plan(backlog)[j * PERIOD]
    assert [(b["input"]["order_id"], b["name"]) for b in tool_calls] == plan(backlog)


def test_a_summary_lost_in_flight_costs_the_one_allowed_repeat(tmp_path):
    summary = next(p for p in boundary_points(backlog_turns("ORD-BL-002"), PERIOD)
                   if CrashPoint.parse(p).is_model_call)  # after:model#3, the first summary
    row = crash_row(AGENT, summary, "ORD-BL-002", workdir=tmp_path, timeout=120, keep=True, result_bytes=64,
                    extra_env={"CRASHLAB_TEST_COMPACT": str(PERIOD)})
    assert row.reached and row.ok, row.problems
    assert (row.duplicates, row.repeated_model_calls, row.finished) == (0, 1, True)
    (payments,) = tmp_path.glob("row-*/world/ledgers/payments.db")  # the row's world gave its receipts
    with sqlite3.connect(payments) as conn:
        kept = [json.loads(response) for (response,) in conn.execute("SELECT response FROM idempotency_keys")]
    assert len(kept) == 2 and all(len(reply["receipt"]) == 64 for reply in kept)
    assert str(summary) == "after:model#3" and BASELINE != summary
