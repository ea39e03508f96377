"""Restate (issue 14 groundwork): the server wrapper, and the Restate order agent under the crash harness.
One Restate server for the module, started here and stopped after; without the binary every test here skips
with one line that says how to install it."""

import os
from pathlib import Path

import httpx
import pytest

from crashlab.harness import crash_test, run_agent
from crashlab.restate_server import (ENV_RESTATE_BIN, RestateServer, RestateServerError, restate_binary,
                                     restate_environment)
from crashlab.world import World

AGENT = Path(__file__).parent / "agents" / "restate_agent.py"
POINTS = ["after:model#1", "after:charge_card", "before:reserve_item", "after:send_confirmation"]
PRELOAD = ("anthropic", "restate", "hypercorn.asyncio", "httpx")


def _binary_or_skip():
    try:
        return restate_binary()
    except RestateServerError as exc:
        pytest.skip(f"no Restate server: {exc}")


@pytest.fixture(scope="module")
def restate(tmp_path_factory):
    """The server, its addresses in os.environ for the agent processes the harness starts."""
    _binary_or_skip()
    try:
        import hypercorn  # noqa: F401
        import restate as sdk  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the Restate SDK or its ASGI server is not installed ({exc}); run `make setup`")
    with restate_environment(tmp_path_factory.mktemp("restate") / "server") as server:
        yield server
    assert server._process.poll() is not None, "the Restate server is still running after the module"


def test_missing_binary_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_RESTATE_BIN, str(tmp_path / "no-such-restate-server"))
    with pytest.raises(RestateServerError, match="make setup"):
        RestateServer.start(tmp_path / "r")


def test_server_is_on_loopback_and_healthy(restate):
    assert restate.ingress_url.startswith("http://127.0.0.1:") and restate.admin_url.startswith("http://127.0.0.1:")
    assert restate.is_ready()
    assert httpx.get(f"{restate.admin_url}/deployments", timeout=5).status_code == 200
    assert os.environ["CRASHLAB_RESTATE_INGRESS"] == restate.ingress_url


def test_baseline_each_effect_once(restate, tmp_path):
    with World.start(tmp_path / "world") as world:
        first = run_agent(AGENT, world, timeout=60)
        assert first.returncode == 0, first.stderr[-2000:]
        again = run_agent(AGENT, world, timeout=60)  # a finished order: its stored result, nothing run again
        assert again.returncode == 0, again.stderr[-2000:]
        audit = world.audit()
    assert audit.finished and audit.duplicates == 0 and audit.repeated_model_calls == 0, str(audit)
    assert audit.counts == {"charge": 1, "reservation": 1, "confirmation": 1}, str(audit)


def test_crash_matrix_is_clean(restate, tmp_path):
    matrix = crash_test(AGENT, POINTS, expect="durable", jobs=1, timeout=60, progress=False, workdir=tmp_path,
                        preload=PRELOAD)
    print(matrix.table())
    assert matrix.ok, "\n".join(matrix.problems)
    for point in POINTS:
        row = matrix.row(point)
        assert row.reached and row.duplicates == 0 and row.finished, row.as_dict()
        assert row.repeated_model_calls == (1 if point.startswith("after:model#") else 0), row.as_dict()


def test_two_resumers_and_a_double_crash(restate, tmp_path):
    """Two resume processes at once (one serves the endpoint, the other only attaches: the virtual object keyed
    by order id runs one invocation), and a resume killed again at a later tool."""
    matrix = crash_test(AGENT, ["after:charge_card"], expect="durable", baseline=False, jobs=1, timeout=60,
                        progress=False, workdir=tmp_path, preload=PRELOAD, resumers=2,
                        double=[("after:model#1", "after:reserve_item")])
    print(matrix.table())
    assert matrix.ok, "\n".join(matrix.problems)
