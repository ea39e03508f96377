"""The chaos soak (``crashlab soak``): real agent processes, SIGKILLs at random moments, racing resumers, a world
killed mid-soak, and a verdict from the world's ledgers only. A keyed agent passes; the naive agent is caught."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.order import ORDER_ID_PATTERN
from crashlab.soak import order_ids, parse_resumers, parse_world_faults, soak

AGENTS = Path(__file__).parent / "agents"
KEYED = AGENTS / "logged_agent.py"  # lesson 1's logged loop, each tool call keyed by the order and the step
NAIVE = AGENTS / "naive_agent.py"  # no keys, no lock: racing resumers redo the same steps


@pytest.fixture(autouse=True)
def no_crash_env(monkeypatch):
    for name in ("CRASHLAB_CRASH_AT", "CRASHLAB_CRASH_MARKER", "CRASHLAB_REAL_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_keyed_agent_survives_random_kills_racing_resumers_and_a_world_kill():
    result = soak(KEYED, orders=4, resumers=(2, 3), world_faults=[("world-kill", 0.0)], seed=11, key_lease=1.0,
                  progress=False)
    figures = result.figures()
    assert result.ok, str(result)
    assert figures["orders"] == 4 and figures["duplicates"] == 0 and figures["lost"] == 0, figures
    assert figures["kills"] >= 1, figures  # kills land inside a clean run's time: most first runs are hit
    assert figures["world_kills"] == 1, figures
    assert figures["processes"] >= 4 * (1 + 2), figures  # a first run and at least one round of 2+ resumers each
    assert all(o.audit.finished and o.duplicates == 0 for o in result.orders)


def test_the_soak_catches_the_naive_agent(tmp_path, capsys):
    out = tmp_path / "soak.json"
    code = main(["soak", str(NAIVE), "--orders", "3", "--resumers", "2..3", "--seed", "3", "--quiet",
                 "--max-rounds", "3", "--json", str(out)])
    figures = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert figures["duplicates"] > 0 and not figures["ok"], printed
    assert "FAIL" in printed and "duplicate" in printed


@pytest.mark.parametrize("argv, message", [
    (["--resumers", "3..2"], "1 <= A <= B"),
    (["--resumers", "0"], "1 <= A <= B"),
    (["--resumers", "two"], "A..B"),
    (["--world-faults", "world-kil"], "unknown world fault"),
    (["--world-faults", "outage:-3"], "outage:SECONDS"),
    (["--orders", "0"], "at least 1"),
    (["--seconds", "0"], "positive"),
    (["--kills", "sometimes"], "invalid choice"),
    (["--json", "/no/such/folder/x.json"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["soak", str(KEYED), *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_order_ids_and_parsers():
    assert all(re.fullmatch(ORDER_ID_PATTERN, o) for o in order_ids(3))
    assert len(set(order_ids(50))) == 50
    assert parse_resumers("2..3") == (2, 3) and parse_resumers("4") == (4, 4)
    assert parse_world_faults("world-kill, outage:8") == [("world-kill", 0.0), ("outage", 8.0)]
