"""Lesson 3 (LangGraph): the reference agent under the crash matrix with racing resumers, the Postgres
variant, bad input, and known-wrong answers scoring less than full. Judged from the world's ledgers."""

import importlib.util
import shutil
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from crashlab.agent import AgentError
from crashlab.grading.grade import score_matrix_check
from crashlab.course.notebooks import written_files
from crashlab.harness import crash_row, run_agent
from crashlab.harness.launcher import WarmLauncher
from crashlab.engines.postgres import fresh_database, postgres_available, throwaway_postgres
from crashlab.world import World
from master_files import matrix_check

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "03_langgraph.ipynb"
PRELOAD = ("langgraph.graph", "langgraph.checkpoint.sqlite")


@pytest.fixture(scope="module")
def master():
    return nbformat.read(MASTER, as_version=4)


@pytest.fixture(scope="module")
def agents(master, tmp_path_factory) -> Path:
    """Every file the master writes with %%writefile, in a folder of their own."""
    folder = tmp_path_factory.mktemp("lesson03")
    for name, source in written_files(master).items():
        (folder / name).write_text(source)
    return folder


@pytest.fixture(scope="module")
def warm():
    launcher = WarmLauncher(PRELOAD)
    yield launcher
    launcher.close()


def run_cli(warm, agent: Path, world: World, *args, crash_at=None):
    """``python AGENT ARGS`` as a new process forked from the warm launcher: (exit code, stdout + stderr)."""
    run = run_agent(agent, world, crash_at=crash_at, launcher=warm, args=list(args), timeout=120)
    return run.returncode, run.stdout + run.stderr


# --- the reference agent -----------------------------------------------------------------------------------------
def test_the_graded_matrix_is_every_point_with_two_racing_resumers(master):
    """The reference agent itself runs this matrix when the master is graded (test_grading_all: full marks
    means every row clean, judged from the world's ledgers); here, that the matrix is the one the text
    promises."""
    check = matrix_check(master, "ex2_crash_matrix")
    assert check["agent"] == "order_agent.py" and check["expect"] == "durable" and check["resumers"] == 2
    assert check.get("crash_points", "all") == "all"


# --- Postgres -----------------------------------------------------------------------------------------------------
def test_postgres_checkpointer_variant(agents, warm, tmp_path):
    ok, why = postgres_available()
    if not ok:
        pytest.skip(f"no local PostgreSQL to start: {why}")
    import psycopg

    with throwaway_postgres(tmp_path) as url:
        for point in ("after:model#2", "after:charge_card"):
            db_url = fresh_database(url, "lesson03")
            row = crash_row(agents / "order_agent.py", point, expect="durable", resumers=2, launcher=warm,
                            extra_env={"CRASHLAB_POSTGRES_URL": db_url}, workdir=tmp_path, keep=True)
            assert row.reached and row.ok, row.problems
            assert row.effects == {"charge": 1, "reservation": 1, "confirmation": 1}
            with psycopg.connect(db_url) as conn:  # the checkpoints really went to Postgres
                count = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'ORD-8842'").fetchone()[0]
            assert count > 0
        assert not list(tmp_path.glob("row-*/world/agent/checkpoints.sqlite")), "no SQLite file with Postgres set"


def load_order_graph(agents: Path):
    """The lesson's order_graph.py as a module of this process, under a name no agent file imports."""
    spec = importlib.util.spec_from_file_location("lesson03_order_graph", agents / "order_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_first_runs_at_once_set_up_a_fresh_postgres_database_once(agents, tmp_path, monkeypatch):
    """Eight first runs at once on a fresh database: each runs the checkpointer's set-up, one at a time under the
    advisory lock; without it, all but one failed on the migrations table's primary key."""
    ok, why = postgres_available()
    if not ok:
        pytest.skip(f"no local PostgreSQL to start: {why}")
    order_graph = load_order_graph(agents)
    with throwaway_postgres(tmp_path) as url:
        monkeypatch.setenv("CRASHLAB_POSTGRES_URL", fresh_database(url, "lesson03_race"))
        start = threading.Barrier(8)

        def first_run(_):
            start.wait()
            with order_graph.open_checkpointer() as saver:
                return type(saver).__name__

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(first_run, range(8))) == ["PostgresSaver"] * 8


def test_a_postgres_server_that_does_not_answer_is_waited_for_then_one_line(agents, monkeypatch):
    order_graph = load_order_graph(agents)
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("CRASHLAB_POSTGRES_URL", f"postgresql://course:s3cret@127.0.0.1:{port}/orders")
    monkeypatch.setattr(order_graph, "POSTGRES_WAIT_S", 1.0)
    with pytest.raises(AgentError) as raised:
        with order_graph.open_checkpointer():
            pass
    message = str(raised.value)
    assert message.startswith(f"cannot reach the Postgres checkpoint database at 127.0.0.1:{port}/orders after 1 s")
    assert "\n" not in message and "s3cret" not in message, message


def test_postgres_available_explains_itself():
    ok, why = postgres_available()
    assert isinstance(ok, bool) and isinstance(why, str) and why


# --- bad input: a clear error, never a fresh start ------------------------------------------------------------------
def test_resume_of_a_missing_database_or_thread_is_a_clear_error(agents, warm, tmp_path):
    agent = agents / "sqlite_agent.py"
    with World.start(tmp_path / "world") as world:
        code, out = run_cli(warm, agent, world, "--order", "ORD-8842", "--resume")
        assert code == 2 and "no checkpoint database" in out, out
        assert not (world.agent_dir / "checkpoints.sqlite").exists(), "a failed resume must not create the database"
        code, out = run_cli(warm, agent, world, "--order", "ORD-8842")
        assert code == 0, out
        code, out = run_cli(warm, agent, world, "--order", "ORD-0000", "--resume")
        assert code == 2 and "no checkpoint for thread 'ORD-0000'" in out, out
        assert world.audit("ORD-0000").model_calls == 0 and world.audit("ORD-0000").counts["charge"] == 0


def test_corrupt_checkpoint_database_is_a_clear_error_and_starts_nothing(agents, warm, tmp_path):
    with World.start(tmp_path / "world") as world:
        code, out = run_cli(warm, agents / "order_agent.py", world, "--order", "ORD-8842",
                            crash_at="before:reserve_item")
        assert code == -9, out
        db = world.agent_dir / "checkpoints.sqlite"
        db.write_bytes(b"\x00garbage, not SQLite" * 200)  # the database file, and its WAL with it
        for extra in world.agent_dir.glob("checkpoints.sqlite-*"):
            extra.unlink()
        before = world.audit()
        for args in (["--order", "ORD-8842"], ["--order", "ORD-8842", "--resume"]):
            code, out = run_cli(warm, agents / "order_agent.py", world, *args)
            assert code == 2 and "unreadable" in out and "refusing to start the order over" in out, out
        after = world.audit()
        assert (after.model_calls, after.counts) == (before.model_calls, before.counts), "nothing may run"


def test_a_decision_for_an_order_that_is_not_waiting_is_a_clear_error(agents, warm, tmp_path):
    with World.start(tmp_path / "world") as world:
        code, out = run_cli(warm, agents / "approval_agent.py", world, "--order", "ORD-8842", "--decision", "approve")
        assert code == 2 and "nothing to resume" in out, out
        assert world.audit().model_calls == 0


# --- known-wrong answers score less than full ----------------------------------------------------------------------
TWO_EFFECTS_NO_KEYS = '''
from langgraph.graph import END, START, StateGraph
from crashlab.agent import call_tool, tool_result_message
from order_graph import OrderState, TOOL_NAMES, main, model_node, pending_call, route

DURABILITY = "sync"


def tool_node(state, config):
    call = pending_call(state)
    if call["name"] in state["done"]:
        result = state["done"][call["name"]]
        return {"messages": [tool_result_message(call["id"], result)], "done": {}}
    result = call_tool(call["name"], call["input"])
    done = {call["name"]: result}
    if call["name"] == "charge_card":  # and email the receipt in the same node: two effects, no keys
        done["send_confirmation"] = call_tool("send_confirmation", {"order_id": call["input"]["order_id"]})
    return {"messages": [tool_result_message(call["id"], result)], "done": done}


def build():
    builder = StateGraph(OrderState)
    builder.add_node("model", model_node)
    for name in TOOL_NAMES:
        builder.add_node(name, tool_node)
        builder.add_edge(name, "model")
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, TOOL_NAMES + [END])
    return builder


if __name__ == "__main__":
    main(build(), DURABILITY)
'''


def wrong_answer(agents: Path, tmp_path: Path, source: str) -> Path:
    for name in ("order_graph.py", "graph_keys.py"):
        shutil.copy(agents / name, tmp_path / name)
    (tmp_path / "order_agent.py").write_text(source)
    return tmp_path


def test_two_effects_in_one_node_without_keys_scores_less_than_full(master, agents, tmp_path):
    workdir = wrong_answer(agents, tmp_path, TWO_EFFECTS_NO_KEYS)
    check = matrix_check(master, "ex2_crash_matrix")
    check["crash_points"] = ["before:reserve_item", "after:charge_card", "before:send_confirmation"]
    result = score_matrix_check(check, workdir)
    assert result.score < result.max_score, result.output
    assert "after:charge_card" in result.output and "2 charges" in result.output, result.output


def test_in_memory_saver_scores_less_than_full(master, agents, tmp_path):
    reference = (agents / "order_agent.py").read_text()
    source = reference.replace('main(build(), DURABILITY)',
                               'from langgraph.checkpoint.memory import InMemorySaver\n'
                               '    main(build(), DURABILITY, checkpointer=InMemorySaver())')
    assert source != reference
    workdir = wrong_answer(agents, tmp_path, source)
    check = matrix_check(master, "ex2_crash_matrix")
    check["crash_points"] = ["before:reserve_item", "before:model#3"]
    result = score_matrix_check(check, workdir)
    assert result.score < result.max_score, result.output
    assert "repeated model call" in result.output, result.output
