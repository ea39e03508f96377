"""The compensation lesson's reference agents on the three engines -- LangGraph (a conditional edge to keyed
compensation nodes), DBOS (try/except around the steps, compensation steps) and Temporal (a saga on a
non-retryable ApplicationError) -- taken from the lesson's master (solutions/07_compensation.ipynb) as it writes
them, under the crash harness through the failure path; and each one unkeyed (the master's ``undo.py`` sending no
key) caught by the audit.

Cheap on purpose, and only what nothing else checks: lesson 11 runs each saga through the failure path at three
points (after the failed reservation, after the refund, after the cancellation) under nbval, which compares its
summary table, and the grader crash-tests the log and DBOS sagas at every point. Here: two racing resumers on two
points of the longer undo (the confirmation fails, so the reservation is released too), the success path at two
points, and the unkeyed variant at the one point where it refunds twice. The full failure-path matrix of each agent
("all" points) is clean too; it runs in about 20 s (LangGraph), 30 s (DBOS) and 50 s (Temporal) on 2 cores, so
it is measured by hand rather than here. Temporal's dev server is started once, through the grader's own
``crashlab.engines.needs``, for the Temporal tests only, and stopped after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from crashlab.harness import crash_test
from crashlab.harness.launcher import WarmLauncher
from crashlab.engines import registry
from crashlab.engines.needs import Needs
from master_files import replace_in, write_master_files

MASTER = Path(__file__).resolve().parents[2] / "solutions" / "07_compensation.ipynb"
UNKEYED = ("idempotency_key=undo_key(order_id, step)", "idempotency_key=None")


def lesson_agents(folder: Path, *, keyed: bool = True) -> Path:
    """The files the lesson's master writes, in ``folder``; with ``keyed=False`` its compensations send no key."""
    folder.mkdir(parents=True, exist_ok=True)
    write_master_files(MASTER, folder)
    if not keyed:
        replace_in(folder / "undo.py", *UNKEYED)
    return folder


@dataclass(frozen=True)
class Engine:
    agent: str
    preload: tuple[str, ...]
    needs: str | None = None


ENGINES = {
    "langgraph": Engine("langgraph_saga_agent.py", registry.ENGINES["langgraph"].imports),
    "dbos": Engine("dbos_saga_agent.py", registry.ENGINES["dbos"].imports),
    "temporal": Engine("temporal_saga_agent.py", registry.ENGINES["temporal"].imports, needs="temporal"),
}


@dataclass
class Running:
    engine: Engine
    launcher: WarmLauncher
    env: dict
    folder: Path

    def matrix(self, points, *, naive: bool = False, **options):
        agent = self.folder / ("unkeyed" if naive else "keyed") / self.engine.agent
        return crash_test(agent, points, progress=False, launcher=self.launcher, extra_env=self.env, timeout=60,
                          **options)


@pytest.fixture(scope="module", params=list(ENGINES))
def engine(request, tmp_path_factory):
    """One engine at a time (pytest groups the tests by it): a warm launcher with the engine imported, and the
    servers it needs -- Temporal's, started as the grader starts it, and stopped once its tests are done."""
    spec = ENGINES[request.param]
    folder = tmp_path_factory.mktemp(f"agents-{request.param}")
    lesson_agents(folder / "keyed")
    lesson_agents(folder / "unkeyed", keyed=False)
    with Needs(tmp_path_factory.mktemp(f"needs-{request.param}")) as needs, WarmLauncher(spec.preload) as warm:
        yield Running(spec, warm, needs.env_for({"needs": spec.needs} if spec.needs else {}), folder)


def undo_order(row) -> list[str]:
    """The compensations the world committed, in the order it committed them."""
    return [event.what for event in sorted(row.events, key=lambda e: e.at)
            if event.what in ("release", "refund", "cancellation")]


def test_two_racing_resumers_undo_a_longer_order_once_in_reverse_order(engine):
    matrix = engine.matrix(["after:send_confirmation", "after:release_item"], fail="send_confirmation",
                           baseline=False, resumers=2)
    assert matrix.ok, str(matrix)
    for row in matrix.rows:
        assert row.verdict == "cleanly undone" and row.duplicates == 0 and row.model_calls == 3, str(matrix)
        assert undo_order(row) == ["release", "refund", "cancellation"], str(matrix)


def test_the_success_path_still_completes_cleanly(engine):
    matrix = engine.matrix(["after:reserve_item", "after:send_confirmation"], baseline=False)
    assert matrix.ok, str(matrix)
    assert all(row.finished and row.effects == {"charge": 1, "reservation": 1, "confirmation": 1}
               for row in matrix.rows), str(matrix)


def test_unkeyed_compensations_refund_twice_after_a_crash_and_the_audit_says_so(engine):
    matrix = engine.matrix(["after:refund_charge"], naive=True, fail="reserve_item", baseline=False)
    row = matrix.rows[0]
    assert row.reached and not matrix.ok, str(matrix)
    assert row.verdict == "inconsistent" and row.effects["refund"] == 2 and row.duplicates == 1, str(matrix)
    assert any("a double refund" in problem for problem in row.problems), row.problems


def test_an_outage_past_the_do_steps_patience_leaves_each_saga_cleanly_undone(tmp_path):
    """No undo step gives up on a failure that may pass. The world stops for 15 s right after the charge, with the
    agent alive; the do steps' patience is scaled down to 3 s (SAGA_PATIENCE_S, SAGA_GIVE_UP_S), so each saga gives
    up the order during the outage and undoes it with the world still down: the undo must outlast the outage and
    leave the order cleanly undone, in the same process, whatever the outage's length (200 s: the README's table).
    The DBOS and Temporal sagas, soaked at once; LangGraph's and the log's retry nothing in their process."""
    from concurrent.futures import ThreadPoolExecutor

    from crashlab.soak import soak
    from crashlab.soak.world import WorldFault

    folder = lesson_agents(tmp_path / "agents")
    scaled = {"dbos": {"SAGA_PATIENCE_S": "3"}, "temporal": {"SAGA_GIVE_UP_S": "3"}}

    def soaked(name: str):
        spec = ENGINES[name]
        return soak(folder / spec.agent, orders=1, resumers=(1, 1), kills="none", timeout=60, seed=1,
                    world_faults=[WorldFault("outage", 15.0, "charge_card")], preload=spec.preload,
                    needs=(spec.needs,) if spec.needs else (), env=scaled[name], may_undo=True, progress=False)

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(scaled, pool.map(soaked, scaled)))
    for name, result in results.items():
        [order] = result.orders
        assert result.ok and order.gave_up and order.audit.verdict == "cleanly undone", (name, str(result))
        assert order.errors == [], (name, order.errors)  # the first process rode the outage out: no rerun needed
        [outage] = result.fault_log
        refunded = next(e.at for e in order.audit.events if e.what == "refund")
        assert refunded >= outage["ended"] and outage["ended"] - outage["began"] >= 15.0, (name, outage, refunded)
