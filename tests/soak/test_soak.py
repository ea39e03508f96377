"""The chaos soak (``crashlab soak``): real agent processes, SIGKILLs at random moments, racing resumers, a world
killed mid-soak or flaky for a while, and a verdict from the world's ledgers only. A keyed agent passes; the naive
agent is caught, and so is an agent that charges every order the same amount.

The soaks of the lessons' reference agents (Temporal's needs its dev server, ``--needs temporal``) take minutes:
they are the instructors' long runs in the README, not tests here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.order import ORDER_ID_PATTERN, order_details
from crashlab.soak import order_ids, parse_resumers, parse_world_faults, soak
from crashlab.soak.reference import reference_spec
from crashlab.soak.world import WorldFault

AGENTS = Path(__file__).parents[1] / "agents"
KEYED = AGENTS / "logged_agent.py"  # lesson 1's logged loop, each tool call keyed by the order and the step
NAIVE = AGENTS / "naive_agent.py"  # no keys, no lock: racing resumers redo the same steps
PATIENT = AGENTS / "patient_agent.py"  # the keyed loop, retried inside its process through any failure that may pass


def test_keyed_agent_survives_random_kills_racing_resumers_a_flaky_world_and_a_world_kill():
    result = soak(KEYED, orders=4, resumers=(2, 3), world_faults=[("flaky", 1.0), ("world-kill", 0.0)], seed=11,
                  key_lease=1.0, progress=False)
    figures = result.figures()
    assert result.ok, str(result)
    assert figures["orders"] == 4 and figures["duplicates"] == 0 and figures["lost"] == 0, figures
    assert figures["wrong_effects"] == 0, figures  # each order charged its own amount, reserved its own SKU
    assert figures["kills"] >= 1, figures  # kills land inside a clean run's time: most first runs are hit
    assert figures["world_kills"] == 1, figures
    assert figures["flaky_periods"] == 1 and figures["flaky_refused"] > 0, figures  # the 503s and 529s were met
    assert figures["processes"] >= 4 * (1 + 2), figures  # a first run and at least one round of 2+ resumers each
    assert all(o.audit.finished and o.duplicates == 0 for o in result.orders)


def test_an_agent_that_retries_in_its_process_is_given_time_to_outlive_an_outage():
    """``outage:8@charge_card`` stops the world as soon as the order's charge is in the ledger, with the agent alive
    (no kills). The outage lasts twice the agent's timeout; the timeout counts only time the world was up, so the
    agent that was retrying through it is not killed as hung, and it finishes the order itself, its reservation
    after the outage."""
    result = soak(PATIENT, orders=1, resumers=(1, 1), kills="none", world_faults=[WorldFault("outage", 8.0, "charge_card")],
                  timeout=4.0, seed=5, progress=False)
    [order] = result.orders
    assert result.ok and order.audit.finished, str(result)
    assert result.figures()["outages"] == 1, result.figures()
    assert order.errors == [], order.errors  # no "hung: killed after the 4 s timeout", no failed run
    [outage] = result.fault_log
    assert outage["fault"] == "outage:8@charge_card" and outage["ended"] - outage["began"] >= 8.0, outage
    charged, reserved = (next(e.at for e in order.audit.events if e.what == what) for what in ("charge", "reservation"))
    assert charged <= outage["began"] and reserved >= outage["ended"], (charged, outage, reserved)


def test_a_paused_world_bills_every_attempt_an_impatient_agent_made_and_the_soak_counts_them():
    """``pause:6@charge_card`` freezes the world (SIGSTOP) with the agent alive. An agent that gives up on a model call
    after 1 s and asks again -- what an engine's attempt timeout does -- leaves requests waiting, and the world
    answers each when it goes on: the model calls beyond a clean run's are the zombie attempts' bill."""
    result = soak(AGENTS / "impatient_agent.py", orders=1, resumers=(1, 1), kills="none", timeout=30, seed=2,
                  world_faults=[WorldFault("pause", 6.0, "charge_card")], progress=False)
    [order] = result.orders
    assert result.ok and order.audit.finished and order.duplicates == 0, str(result)
    assert result.figures()["pauses"] == 1 and result.settings["clean_model_calls"] == 4, result.figures()
    assert result.extra_model_calls >= 1 and order.audit.repeated_model_calls == result.extra_model_calls, str(result)
    assert "extra model calls" in str(result) and "world pauses" in str(result)


def test_a_world_that_dies_on_its_own_is_restarted_and_an_audit_it_never_answers_is_said(tmp_path, monkeypatch):
    from crashlab.plumbing.processes import kill_group
    from crashlab.soak.results import OrderResult, SoakResult
    from crashlab.soak.world import SoakWorld
    from crashlab.world import WorldError

    world = SoakWorld(tmp_path / "w", key_lease=None)
    try:
        kill_group(world.world.pid)  # not a fault of the soak's: someone else killed it
        assert world.audit("ORD-SOAK-0001").counts["charge"] == 0 and world.deaths == 1
        kill_group(world.world.pid)

        def no_world(port):
            raise WorldError("the world did not start")
        monkeypatch.setattr(world, "_restart", no_world)
        assert world.try_audit("ORD-SOAK-0001", attempts=2) is None and world.unaudited == ["ORD-SOAK-0001"]
    finally:
        world.stop()
    summary = SoakResult("agent.py", {"world_faults": [], "resumers": "1..1", "kills": "none", "kill_window": 1.0,
                                      "seed": 1}, [OrderResult("ORD-SOAK-0001")], 0, [], 1.0,
                         unaudited=world.unaudited, world_deaths=world.deaths)
    text = str(summary)
    assert "did not answer the audit of 1 order(s) (ORD-SOAK-0001): they count as lost" in text, text
    assert "world deaths" in text and text.endswith("FAIL: 0 duplicate(s), 1 lost order(s), 0 wrong amount(s) or SKU(s)")


def test_a_reference_saga_is_soaked_down_the_failure_path_its_lesson_gives_it(tmp_path, capsys):
    """``--reference 07`` is the log saga, whose spec says reserve_item fails for good: every order must end cleanly
    undone (had the soak run the do path, the saga would have completed them and passed for the wrong reason)."""
    out = tmp_path / "soak.json"
    code = main(["soak", "--reference", "07", "--orders", "1", "--resumers", "1..2", "--seed", "4", "--quiet",
                 "--max-rounds", "3", "--json", str(out)])
    figures = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert code == 0 and figures["ok"], printed
    assert figures["settings"]["fail"] == "reserve_item:out_of_stock" and "reserve_item:out_of_stock fails" in printed
    assert [o["audit"]["verdict"] for o in figures["per_order"]] == ["cleanly undone"], figures["per_order"]


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
    (["--resumers", "2..500"], "at most 32 resumers"),
    (["--world-faults", "world-kil"], "unknown world fault"),
    (["--world-faults", "outage:-3"], "outage:SECONDS"),
    (["--world-faults", "flaky"], "flaky:SECONDS"),
    (["--world-faults", "flaky:"], "flaky:SECONDS"),
    (["--world-faults", "flaky:0"], "flaky:SECONDS"),
    (["--world-faults", "flaky:-2"], "flaky:SECONDS"),
    (["--world-faults", "flaky:soon"], "flaky:SECONDS"),
    (["--world-faults", "flaky:nan"], "flaky:SECONDS"),
    (["--world-faults", "flaky:inf"], "flaky:SECONDS"),
    (["--world-faults", "flaky:3600"], "flaky:SECONDS"),
    (["--world-faults", "flaky:5:503"], "flaky:SECONDS"),
    (["--world-faults", "world-kill:3"], "world-kill takes no seconds"),
    (["--world-faults", "outage:5@charge"], "@ names the tool after whose effect the fault fires"),
    (["--world-faults", "outage:5@"], "@ names the tool"),
    (["--env", "SAGA_PATIENCE_S"], "expected NAME=VALUE"),
    (["--env", "1X=2"], "expected NAME=VALUE"),
    (["--world-faults", " , "], "no world faults given"),
    (["--needs", "postgres"], "invalid choice"),
    (["--orders", "0"], "at least 1"),
    (["--seconds", "0"], "positive"),
    (["--kills", "sometimes"], "invalid choice"),
    (["--json", "/no/such/folder/x.json"], "does not exist"),
    (["--fail", "nosuch"], "no permanent failure for 'nosuch'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["soak", str(KEYED), *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv, message", [
    (["--reference", "99"], "no lesson '99'"),
    (["--reference", "01"], "no durable reference agent"),
    (["--reference", "02:nosuch"], "no reference agent 'nosuch'"),
    ([str(KEYED), "--reference", "02"], "not both"),
    ([], "give an agent file, or --reference LESSON"),
])
def test_a_bad_reference_is_one_line_and_exit_2(argv, message, capsys):
    try:
        code = main(["soak", *argv])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_reference_agents_come_from_the_masters_with_what_they_need():
    """``--reference 05`` soaks lesson 5's durable agent with the Temporal dev server; ``02:uuid_agent.py`` names
    an agent meant to fail, for a workshop to watch it duplicate."""
    picked = {lesson: reference_spec(lesson)[1] for lesson in ("2", "03", "04_dbos", "05")}
    assert {k: v["agent"] for k, v in picked.items()} == {"2": "keyed_agent.py", "03": "order_agent.py",
                                                         "04_dbos": "dbos_agent.py", "05": "temporal_agent.py"}
    assert picked["05"]["needs"] == "temporal" and "dbos" in picked["04_dbos"]["preload"]
    assert reference_spec("02:uuid_agent")[1]["expect"] == "observe"


FIXED_PRICE_AGENT = """
from crashlab.agent import (AMOUNT, MAX_TOKENS, MODEL, TOOLS, agent_main, call_tool, content_to_dicts, first_tool_use,
                            model_client, order_task, tool_result_message)


def run(order_id):
    client, messages = model_client(), [{"role": "user", "content": order_task(order_id)}]
    while True:
        content = content_to_dicts(client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,
                                                          messages=messages).content)
        messages.append({"role": "assistant", "content": content})
        call = first_tool_use(content)
        if call is None:
            return
        args = {**call["input"], **({"amount": AMOUNT} if call["name"] == "charge_card" else {})}
        result = call_tool(call["name"], args, idempotency_key=f"{order_id}/{call['name']}")
        messages.append(tool_result_message(call["id"], result))


agent_main(run)
"""


def test_the_soak_checks_each_order_was_charged_its_own_amount(tmp_path):
    """Soak orders each have their own amount and SKU: an agent that charges the lessons' $49.99 to every order
    finishes every order, duplicates nothing, and fails the soak."""
    agent = tmp_path / "fixed_price_agent.py"
    agent.write_text(FIXED_PRICE_AGENT)
    result = soak(agent, orders=1, resumers=(1, 1), kills="none", max_rounds=1, seed=1, progress=False)
    amount, _ = order_details("ORD-SOAK-0001")
    assert (result.duplicates, result.lost, result.wrong_effects, result.ok) == (0, 0, 1, False), str(result)
    assert f"charged 49.99 instead of ${amount:.2f}" in str(result)


def test_order_ids_and_parsers():
    assert all(re.fullmatch(ORDER_ID_PATTERN, o) for o in order_ids(3))
    assert len(set(order_ids(50))) == 50
    assert parse_resumers("2..3") == (2, 3) and parse_resumers("4") == (4, 4)
    assert parse_world_faults("world-kill, outage:8") == [("world-kill", 0.0, None), ("outage", 8.0, None)]
    assert parse_world_faults("flaky:20,world-kill,flaky:0.5") == [("flaky", 20.0, None), ("world-kill", 0.0, None),
                                                                  ("flaky", 0.5, None)]
    assert parse_world_faults("outage:200@charge_card,world-kill@refund_charge") == [
        WorldFault("outage", 200.0, "charge_card"), WorldFault("world-kill", 0.0, "refund_charge")]
    with pytest.raises(ValueError, match="unknown need 'postgres'"):
        soak(KEYED, orders=1, needs=("postgres",))  # refused before anything starts
