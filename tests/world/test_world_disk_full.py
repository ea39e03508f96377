"""A world whose disk fills up says so: a charge it could not write is answered 507 ``disk_full``, which the agent's
tool client reports in one line and does not retry, and nothing of that charge is kept (the ledger's transaction
rolled back); the same charge, sent again once there is room, is made once."""

from __future__ import annotations

import os

import pytest

from full_disk import fill, tiny_disk
from crashlab.agent import ToolCallFailed, call_tool
from crashlab.order import AMOUNT, ORDER_ID
from crashlab.world import World


def test_a_charge_the_world_cannot_write_is_a_507_that_says_the_disk_is_full(tmp_path, monkeypatch):
    with tiny_disk(tmp_path / "disk", size="4m") as disk:
        with World.start(disk / "world") as world:
            for key, value in world.env().items():
                monkeypatch.setenv(key, value)
            fill(disk)
            with pytest.raises(ToolCallFailed) as failed:
                call_tool("charge_card", {"order_id": ORDER_ID, "amount": AMOUNT}, idempotency_key="k1")
            assert failed.value.status == 507 and not failed.value.retryable, str(failed.value)
            assert "the disk is full" in str(failed.value) and "\n" not in str(failed.value)
            os.unlink(disk / "filler")  # room again (even reading a ledger writes to its WAL index)
            assert world.audit().counts.get("charge", 0) == 0  # nothing of it was kept
            call_tool("charge_card", {"order_id": ORDER_ID, "amount": AMOUNT}, idempotency_key="k1")
            assert world.audit().counts["charge"] == 1
