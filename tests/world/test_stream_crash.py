"""Crash points inside a stream, through the real harness: the world SIGKILLs the run at ``mid:model#N@chunkK`` (once
the screen shows the text through chunk K) or at a streamed ``after:model#N`` (every word sent, ``message_stop`` held
back), a new process resumes, and the verdicts read the world's ledgers -- the model's and the screen's.

A relay that shows each delta as it comes shows part of an answer twice (exactly the chunks the user had seen) or all
of it; one that names each chunk by (turn, chunk, attempt) and withdraws a stale attempt shows every recorded word
once, with the one allowed retraction. One world for the module (each row an order of its own), streaming fast: the
screen wait makes the points exact at any pace.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashlab.crash_points import CrashPoint
from crashlab.harness import crash_row, run_agent
from crashlab.harness.verdicts import judge, judge_screen
from crashlab.world import World
from crashlab.world.screen_ledger import ScreenLedger

AGENT = Path(__file__).resolve().parents[1] / "agents" / "stream_relay_agent.py"
FINAL = "Order {order} is complete: the card was charged $49.99, SKU-772 is reserved, and the confirmation was sent."


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with World.start(tmp_path_factory.mktemp("stream-crash") / "world") as world:
        world.streaming(pace=0.002)
        yield world


@pytest.mark.parametrize("relay, point, order, twice", [
    ("offset", "mid:model#1@chunk2", "ORD-R2", None),
    ("naive", "after:model#4", "ORD-R3", '"Order ORD-R3 is complete: the card was charged'),  # the whole answer
    ("offset", "after:model#4", "ORD-R4", None),
])
def test_a_run_killed_while_the_user_watched_shows_twice_with_a_naive_relay_and_once_with_identities(
        world, relay, point, order, twice):
    env = {"STREAM_RELAY": relay}
    crashed = run_agent(AGENT, world, order, crash_at=point, extra_env=env, timeout=60)
    assert crashed.crashed_at == point and crashed.killed, crashed.stderr
    resumed = run_agent(AGENT, world, order, extra_env=env, timeout=60)
    audit, screen = world.audit(order), world.screen_audit(order)

    assert judge(point, audit, True, resumed, "durable") == []  # finished, no duplicate, the one allowed repeat
    assert audit.repeated_model_calls == 1
    problems = judge_screen(point, screen)
    if twice is None:
        assert problems == [] and screen.clean and screen.retractions == 1, screen
    else:
        assert len(problems) == 1 and screen.shown_twice[0].startswith(twice), screen
        assert screen.counts["shown twice"] == 1 and screen.retractions == 0
        assert problems[0].startswith(f"{point}: on the user's screen, shown twice: {twice}")
    assert screen.visible.endswith(FINAL.format(order=order))
    cut = [d["cut"] for d in ScreenLedger(world.ledger_dir).deliveries(order) if d["cut"]]
    inside = CrashPoint.parse(point).chunk is not None
    assert cut == ["killed after text delta 2" if inside else "killed before message_stop"]


def test_a_crash_matrix_row_judges_what_the_user_saw_for_an_agent_that_shows_anything(tmp_path):
    row = crash_row(AGENT, "mid:model#4@chunk6", workdir=tmp_path, extra_env={"STREAM_RELAY": "naive"})
    assert row.reached and row.finished and row.repeated_model_calls == 1 and row.duplicates == 0
    # the six text deltas the user had seen when the run was killed, then the whole answer from the resume
    assert row.problems == ['mid:model#4@chunk6: on the user\'s screen, shown twice: "Order ORD-8842 is complete: the card"']
