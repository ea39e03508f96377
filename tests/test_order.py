"""Order ids: the model reads the whole id out of the task, so two orders never share one's effects."""

import re
from pathlib import Path

import pytest

from crashlab.harness import run_agent
from crashlab.order import ORDER_ID_PATTERN, order_task
from crashlab.world import World
from crashlab.world.policy import order_from

AGENT = Path(__file__).parent / "agents" / "naive_agent.py"


@pytest.mark.parametrize("order_id", ["ORD-8842", "ORD-77-B", "ORD-2026-11-30-A7"])
def test_the_model_reads_the_whole_order_id(order_id):
    assert re.fullmatch(ORDER_ID_PATTERN, order_id)
    assert order_from([{"role": "user", "content": [{"type": "text", "text": order_task(order_id)}]}])["order_id"] \
        == order_id


@pytest.mark.parametrize("not_an_id", ["ORD-", "ORD--1", "ORD-1-", "ord-1", "ORD 1"])
def test_what_is_not_an_order_id(not_an_id):
    assert not re.fullmatch(ORDER_ID_PATTERN, not_an_id)


def test_an_order_with_a_dash_in_its_id_charges_that_order_and_no_other(tmp_path):
    with World.start(tmp_path / "world") as world:
        done = run_agent(AGENT, world, "ORD-77-B")
        assert done.returncode == 0, done.last_error_line()
        assert world.audit("ORD-77-B").finished and world.audit("ORD-77-B").duplicates == 0
        assert world.audit("ORD-77").model_calls == 0 and not any(world.audit("ORD-77").counts.values())
