"""A world forked from a warm launcher (each crash row's, when its agents are forked) is the same world as one in a
new interpreter: a server process of its own that answers, keeps its ledgers across a restart, stops for real, and
says why when it cannot start; the folder it read the server's first line through is gone."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from crashlab.harness.launcher import kept_launcher
from crashlab.order import AMOUNT, ORDER_ID
from crashlab.world import World, WorldError


def stat_ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture(autouse=True)
def own_tmp(tmp_path, monkeypatch):
    """A temporary folder of this test's own: other workers' forked worlds make their folders in the shared one."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def out_folders() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("crashlab-world-out-")}


def test_a_forked_world_serves_keeps_its_ledgers_across_a_restart_and_stops(tmp_path, monkeypatch):
    from crashlab.agent import charge_card

    launcher = kept_launcher()
    before = out_folders()
    world = World.start(tmp_path / "w", launcher=launcher)
    try:
        assert stat_ppid(world.pid) == launcher.pid and world.pid != launcher.pid
        assert world.is_alive() and world.running()
        for key, value in world.env().items():
            monkeypatch.setenv(key, value)
        charge_card(ORDER_ID, AMOUNT, idempotency_key="k1")
    finally:
        world.stop()
    assert not world.running() and not world.is_alive()
    again = World.start(tmp_path / "w", fresh=False, launcher=launcher)
    try:
        assert again.audit().counts["charge"] == 1, "the ledgers survive the restart"
    finally:
        again.stop()
    assert out_folders() == before


def test_a_forked_world_that_cannot_start_says_why(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    before = out_folders()
    try:
        with pytest.raises(WorldError, match="did not start"):
            World.start(tmp_path / "w", port=taken.getsockname()[1], launcher=kept_launcher(), timeout=10)
    finally:
        taken.close()
    assert out_folders() == before
