"""Restate: the server wrapper, and what the lesson's notebook does not show. The lesson's agent files come from
the master (tests/master_files.py); its crash matrix runs when test_grading_all grades the master, and nbval runs
its scenes. Without the binary every test here skips with one line that says how to install it."""

import os
from pathlib import Path

import httpx
import pytest

from crashlab.harness import run_agent
from crashlab.engines.restate import (ENV_RESTATE_BIN, RestateServer, RestateServerError, admin_sql,
                                     restate_environment)
from crashlab.world import World
from master_files import write_master_files
from restate_or_skip import restate_or_skip

MASTER = Path(__file__).resolve().parents[2] / "solutions" / "06_restate.ipynb"
pytestmark = pytest.mark.needs_restate


@pytest.fixture(scope="module")
def restate(tmp_path_factory):
    """The server, its addresses in os.environ for the agent processes the harness starts."""
    restate_or_skip()
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
    assert admin_sql(restate.admin_url, "SELECT id FROM sys_invocation") == []  # a fresh server


def test_the_invokers_spill_folder_is_in_the_servers_own_folder(restate):
    """Left to itself the server makes an ``invoker-<id>`` folder per partition in the temporary folder, which
    nothing removes (every soak and demo left two); its own folder, removed with it, holds them instead. The
    server made this folder itself: nothing in the library creates it."""
    assert (restate.data_dir / "invoker-tmp").is_dir()
    assert "invoker-tmp" in (restate.data_dir / "restate.toml").read_text()


def test_a_finished_order_runs_nothing_again(restate, tmp_path):
    """The lesson's agent, run twice on one world: the second process finds the finished invocation (the same
    idempotency key on the send) and gets its stored result; nothing is asked or charged again."""
    write_master_files(MASTER, tmp_path)
    with World.start(tmp_path / "world") as world:
        for _ in range(2):
            run = run_agent(tmp_path / "restate_agent.py", world, timeout=60)
            assert run.returncode == 0 and run.stdout.startswith("[done]"), run.stderr[-2000:]
        audit = world.audit()
    assert audit.finished and audit.duplicates == 0 and audit.repeated_model_calls == 0, str(audit)
    assert audit.counts == {"charge": 1, "reservation": 1, "confirmation": 1} and audit.model_calls == 4, str(audit)
