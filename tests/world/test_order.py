"""Order ids: the model reads the whole id out of the task, so two orders never share one's effects; and the
catalogue gives the soak's orders amounts and SKUs of their own."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from crashlab.harness import run_agent
from crashlab.order import AMOUNT, ORDER_ID_PATTERN, SKU, effect_mismatches, order_details, order_task
from crashlab.world import World
from crashlab.world.policy import order_from

AGENT = Path(__file__).parents[1] / "agents" / "naive_agent.py"


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


# --- the order catalogue: orders of their own ------------------------------------------------------------------
def test_the_lessons_orders_keep_49_99_and_sku_772():
    """Every id the notebooks use keeps today's amount and SKU, so no notebook's output changes."""
    for order_id in ["ORD-8842", "ORD-8843", "ORD-7001", "ORD-9001", "ORD-0000", "ORD-1", "ORD-77-B"]:
        assert order_details(order_id) == (AMOUNT, SKU)
    assert order_task() == order_task("ORD-8842", AMOUNT, SKU) and "$49.99" in order_task() and SKU in order_task()


def test_soak_orders_have_their_own_amount_and_sku_the_same_in_every_process():
    ids = [f"ORD-SOAK-{n:04d}" for n in range(200)]
    details = [order_details(order_id) for order_id in ids]
    assert len(set(details)) == len(ids) and (AMOUNT, SKU) not in details
    assert all(5 <= amount < 500 and re.fullmatch(r"SKU-\d{3}", sku) and sku != SKU for amount, sku in details)
    other = subprocess.run([sys.executable, "-c", "from crashlab.order import order_details as d; "
                            f"print([d(i) for i in {ids[:5]!r}])"], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == repr(details[:5])  # derived from the id, not from hash(): no PYTHONHASHSEED
    for order_id, (amount, sku) in zip(ids, details):  # the model reads them back out of the task exactly
        read = order_from([{"role": "user", "content": [{"type": "text", "text": order_task(order_id)}]}])
        assert (read["amount"], read["sku"]) == (amount, sku)


def test_effects_that_are_not_the_orders_own_are_named():
    amount, sku = order_details("ORD-SOAK-0001")
    right = {"charge": [{"params": {"order_id": "ORD-SOAK-0001", "amount": amount}}],
             "reservation": [{"params": {"order_id": "ORD-SOAK-0001", "sku": sku}}]}
    assert effect_mismatches("ORD-SOAK-0001", right) == []
    wrong = {"charge": [{"params": {"amount": AMOUNT}}], "reservation": [{"params": {"sku": SKU}}]}
    assert effect_mismatches("ORD-SOAK-0001", wrong) == [f"charged 49.99 instead of ${amount:.2f}",
                                                         f"reserved 'SKU-772' instead of {sku}"]
