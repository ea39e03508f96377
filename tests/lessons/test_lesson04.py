"""Lesson 4 (DBOS): the reference agent is clean at every crash point with two racing resumers, on
SQLite and on PostgreSQL; bad input gives one clear line; the known-wrong answers lose points."""

import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from crashlab.grading.grade import score_matrix_check
from master_files import matrix_check, replace_in as _replace
from crashlab.harness import crash_row, run_agent
from crashlab.engines.registry import ENGINES
from crashlab.engines.postgres import postgres_available, throwaway_postgres
from crashlab.world import World

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "04_dbos.ipynb"
AGENT = "dbos_agent.py"
PRELOAD = ENGINES["dbos"].imports  # what the module's launcher imports (conftest.py's launcher)


def test_the_graded_matrix_is_every_point_with_two_resumers():
    """The reference agent runs this matrix when the master is graded (test_grading_all: full marks means
    every row clean); here, that the matrix is the one the text promises."""
    nb = nbformat.read(ROOT / "solutions" / "04_dbos.ipynb", as_version=4)
    [check] = nb.metadata["crashlab"]["matrix_checks"]
    assert check["agent"] == AGENT and check["expect"] == "durable" and check["resumers"] == 2
    assert check.get("crash_points", "all") == "all"


def test_reference_agent_on_postgres(lesson_files, launcher):
    available, why = postgres_available()
    if not available:
        pytest.skip(f"no throwaway PostgreSQL on this machine: {why}")
    folder, _ = lesson_files
    with throwaway_postgres(folder / "pg") as url:
        base = url.rsplit("/", 1)[0]

        def row(args):
            number, point = args  # one database per row: each row is a fresh world with a fresh order
            return crash_row(folder / AGENT, point, workdir=folder, launcher=launcher, resumers=2,
                             extra_env={"CRASHLAB_POSTGRES_URL": f"{base}/lesson04_row{number}"})

        points = ["after:charge_card", "before:model#3"]
        with ThreadPoolExecutor(2) as pool:
            rows = list(pool.map(row, enumerate(points)))
        import psycopg

        for number, _ in enumerate(points):  # the journal really is in PostgreSQL
            with psycopg.connect(f"{base}/lesson04_row{number}") as conn:
                found = conn.execute("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = 'ORD-8842'")
                assert found.fetchall() == [("SUCCESS",)]
    for result in rows:
        assert result.ok and result.duplicates == 0 and result.finished, result.problems
        assert result.repeated_model_calls == 0, result.point


def test_bad_input_gives_one_clear_line(lesson_files, launcher):
    folder, _ = lesson_files
    agent = folder / AGENT
    (folder / "other_amount_agent.py").write_text(
        agent.read_text().replace("task = order_task(order_id)", "task = order_task(order_id, amount=59.99)"))
    (folder / "next_version_agent.py").write_text(
        agent.read_text().replace('APP_VERSION = "order-agent-1"', 'APP_VERSION = "order-agent-2"'))
    assert "59.99" in (folder / "other_amount_agent.py").read_text()
    assert "order-agent-2" in (folder / "next_version_agent.py").read_text()

    with World.start(folder / "w-inputs") as world:
        assert run_agent(agent, world, launcher=launcher).returncode == 0
        other = run_agent(folder / "other_amount_agent.py", world, launcher=launcher, timeout=30)
        assert other.returncode == 2, other.stderr[-800:]
        line = other.last_error_line()
        assert line.startswith("error: workflow ORD-8842 already exists with other inputs"), line
        assert "$49.99" in line and "Use a new order id" in line, line
        assert world.audit().counts == {"charge": 1, "reservation": 1, "confirmation": 1}

    with World.start(folder / "w-version") as world:
        assert run_agent(agent, world, crash_at="before:reserve_item", launcher=launcher).killed
        bumped = run_agent(folder / "next_version_agent.py", world, launcher=launcher, timeout=30)
        assert bumped.returncode == 2 and not bumped.timed_out, bumped.stderr[-800:]
        line = bumped.last_error_line()
        assert "PENDING under application version 'order-agent-1'" in line, line
        assert "'order-agent-2'" in line and "pin application_version" in line, line
        # the old code still finishes it, and nothing was done twice
        assert run_agent(agent, world, launcher=launcher).returncode == 0
        assert world.audit().finished and world.audit().duplicates == 0

    with World.start(folder / "w-database") as world:
        (world.agent_dir / "dbos.sqlite").write_text("not a database\n" * 200)
        broken = run_agent(agent, world, launcher=launcher, timeout=30)
        assert broken.returncode == 2, broken.stderr[-800:]
        line = broken.last_error_line()
        assert line.startswith("error: cannot open the DBOS system database at sqlite:///"), line
        assert "dbos.sqlite" in line and "file is not a database" in line, line
        with socket.socket() as sock:  # a port where nothing listens
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        url = f"postgresql://course:s3cret-password@127.0.0.1:{port}/orders"
        refused = run_agent(agent, world, launcher=launcher, timeout=30, extra_env={"CRASHLAB_POSTGRES_URL": url})
        assert refused.returncode == 2, refused.stderr[-800:]
        line = refused.last_error_line()
        assert line.startswith(f"error: cannot open the DBOS system database at 127.0.0.1:{port}/orders"), line
        assert "s3cret-password" not in refused.stdout + line
        assert world.audit().model_calls == 0


def test_model_call_outside_a_step_scores_less_than_full(lesson_files):
    """A known-wrong answer to exercise 2: the model is asked in the workflow body, so recovery asks again."""
    folder, nb = lesson_files
    _replace(folder / AGENT, '''        reply = ask_model(messages)
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] != "tool_use":
            return reply["content"][0]["text"]
        call = first_tool_use(reply["content"])''', '''        from crashlab.agent import MAX_TOKENS, MODEL, TOOLS, content_to_dicts, model_client
        raw = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        reply = {"stop_reason": raw.stop_reason, "content": content_to_dicts(raw.content)}
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] != "tool_use":
            return reply["content"][0]["text"]
        call = first_tool_use(reply["content"])''')
    result = score_matrix_check(matrix_check(nb, points=["before:charge_card"], agent=AGENT), folder)
    assert result.score < result.max_score, result.output
    assert "1 of the 2 crash points run failed" in result.output, result.output
    assert "before:charge_card: 1 repeated model call" in result.output, result.output


def test_uuid4_key_scores_less_than_full(lesson_files):
    """A known-wrong answer to exercise 1: a fresh key per attempt, so the retried step charges again."""
    folder, nb = lesson_files
    _replace(folder / "dbos_steps.py", 'key = f"{DBOS.workflow_id}:step-{DBOS.step_id}:{name}"',
             "import uuid\n    key = str(uuid.uuid4())")
    result = score_matrix_check(matrix_check(nb, points=["after:charge_card"], agent=AGENT), folder)
    assert result.score < result.max_score, result.output
    assert "1 of the 2 crash points run failed" in result.output, result.output
    assert "after:charge_card: 2 charges (1 duplicate)" in result.output, result.output


def test_retries_end_by_the_clock_not_by_a_count(lesson_files, launcher):
    """An outage must not leave an order in ERROR: the steps retry for a time, however many attempts it takes.
    Past that time the order is in ERROR, and a resume says so in one line instead of replaying a traceback."""
    folder, _ = lesson_files
    _replace(folder / "dbos_steps.py", "interval_seconds=1.0, backoff_rate=1.1",
             "interval_seconds=0.02, backoff_rate=1.0")  # quick attempts, so that many fit in a second
    agent = folder / AGENT
    with World.start(folder / "w-many") as world:
        world.inject("refuse:reserve_item", 15, "503")  # more failures than a count of ten attempts would survive
        ran = run_agent(agent, world, launcher=launcher, timeout=60)
        assert ran.returncode == 0, ran.last_error_line()
        assert world.audit().counts == {"charge": 1, "reservation": 1, "confirmation": 1}
    with World.start(folder / "w-patience") as world:
        world.inject("refuse:reserve_item", 100_000, "503")
        gave_up = run_agent(agent, world, launcher=launcher, timeout=60, extra_env={"STEP_PATIENCE_S": "0.5"})
        assert gave_up.returncode == 2, gave_up.stderr[-800:]
        assert gave_up.last_error_line().startswith("error: reserve_item"), gave_up.last_error_line()
        resumed = run_agent(agent, world, launcher=launcher, timeout=30)
        assert resumed.returncode == 2, resumed.stderr[-800:]
        line = resumed.last_error_line()
        assert line.startswith("error: workflow ORD-8842 ended in ERROR (ToolCallFailed"), line
        assert "DBOS.fork_workflow from the step that failed" in line, line
        assert world.audit().counts == {"charge": 1, "reservation": 0, "confirmation": 0}
