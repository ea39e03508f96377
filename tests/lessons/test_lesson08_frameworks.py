"""The frameworks lesson: the graded matrices are the ones its text promises, known-wrong answers lose their own
exercise's points only -- a DBOS run identity that is new in every process scores 0 on the crash matrix, and one
grading of a notebook with three subtly wrong answers (a key without the tool call id, tools that are not DBOS
steps, a tool call outside a LangGraph task) shows each exercise's hidden checks catching its own mistake while
the crash matrices keep their points -- and the given agents stop at once on a failure that is for good: a 4xx from
a service or the model is a non-retryable ApplicationError on Temporal and a TerminalError on Restate.

Cheap on purpose: the master's matrices run when test_grading_all grades the master, and nbval runs its scenes;
here one matrix check runs one crash point, and the one full grading checks the three wrong answers at once. (The
DBOS default mode and a key from the tool_use id, each alone, are test_mutants' cases.)"""

from pathlib import Path

import nbformat
import pytest

from crashlab.course.notebooks import grade_id
from crashlab.grading.grade import grade_notebook, score_matrix_check
from master_files import matrix_check, replace_in as replace

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "08_frameworks.ipynb"


def test_the_graded_matrices_are_the_ones_the_text_promises():
    meta = nbformat.read(MASTER, as_version=4).metadata["crashlab"]
    checks = {c["name"]: c for c in meta["matrix_checks"]}
    assert {name: c["agent"] for name, c in checks.items()} == {
        "ex1_crash_matrix": "pai_temporal_agent.py", "ex1_restate_matrix": "pai_restate_agent.py",
        "ex2_crash_matrix": "pai_dbos_agent.py", "ex3_crash_matrix": "lg_functional_agent.py"}
    for check in checks.values():
        assert check["resumers"] == 2 and check["expect"] == "durable", check["name"]
        assert {"after:charge_card", "after:reserve_item"} <= set(check["crash_points"]), check["name"]
    # two tools in one reply: each block keyed on its own, crashed between and after the two effects
    for name in ("ex1_crash_matrix", "ex2_crash_matrix"):
        assert checks[name]["faults"] == [["parallel_tool_use", 10, None]] and "after:model#1" in checks[name]["crash_points"]
    assert checks["ex1_crash_matrix"]["needs"] == "temporal" and checks["ex1_restate_matrix"]["needs"] == "restate"
    # exercise 2's agent builds on exercise 1's key: its matrix runs on the master's key, so one wrong key costs once
    assert checks["ex2_crash_matrix"]["on_reference_answers"] and meta["reference_answers"] == ["ex1_tool_key"]
    demo = {a["agent"]: a["expect"] for a in meta["demo_agents"]}
    assert demo == {"plain_pai_agent.py": "observe", "pai_temporal_agent.py": "durable",
                    "pai_dbos_agent.py": "durable", "pai_restate_agent.py": "durable",
                    "lg_functional_agent.py": "durable"}
    assert all(a.get("preload") for a in meta["demo_agents"]), "each demo agent names what its launcher preloads"


def test_the_table_s_recovery_time_is_the_median_over_the_crashed_rows():
    """The lesson's table reads each integration's recovery from its matrix: the clean baseline's run time is no
    recovery, and a row with no resume has none."""
    from crashlab.harness import BASELINE, Matrix, Row
    from crashlab.lessons import median_recovery

    def row(point, seconds):
        return Row(point, True, {}, 0, 4, 0, True, seconds)

    matrix = Matrix("agent.py", "ORD-8842", "durable", [row(BASELINE, 9.0), row("before:model#1", 1.0),
                                                        row("after:charge_card", 3.0), row("after:model#2", None),
                                                        row("after:reserve_item", 2.0), row("after:model#3", 4.0)], 1.0)
    assert median_recovery(matrix) == 2.5
    assert median_recovery(Matrix("agent.py", "ORD-8842", "durable", [row(BASELINE, 9.0)], 1.0)) is None


def test_a_run_identity_new_in_every_process_scores_0_for_the_dbos_matrix(lesson_files):
    """A known-wrong answer to exercise 2: the key's identity is a fresh uuid, as ctx.run_id is outside an engine,
    so the recovery's repeat of the charge is a new charge."""
    folder, nb = lesson_files
    replace(folder / "pai_dbos_agent.py", "    return ctx.run_id", "    return __import__('uuid').uuid4().hex")
    result = score_matrix_check(matrix_check(nb, "ex2_crash_matrix", ["after:charge_card"], faults=[]), folder)
    assert result.score == 0, result.output
    assert "after:charge_card" in result.output and "duplicate" in result.output, result.output


WRONG_KEY = ('    return f"{run_identity}/{tool_call_id}/{tool}"',
             '    return f"{run_identity}/{tool}"  # wrong: two calls of one tool share a key')
WRONG_TOOL_STEP = ('tool_step = DBOS.step(name="order_agent__tool_call", **TOOL_RETRIES) if TOOL_STEPS else None',
                   "tool_step = None  # wrong: DBOS runs every tool again on each recovery")
WRONG_TASK = ('            messages.append(tool_result_message(call["id"], run_tool(call["name"], call["input"], key).result()))',
              '            messages.append(tool_result_message(call["id"], call_tool(call["name"], call["input"], '
              'idempotency_key=key)))  # wrong: not a task')


@pytest.mark.needs_restate
def test_subtly_wrong_answers_lose_their_exercises_points_only(tmp_path):
    """Three answers that pass their visible checks and the crash matrices (the keys make each repeat harmless):
    the hidden checks catch each, and the matrices keep their points."""
    nb = nbformat.read(MASTER, as_version=4)
    cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
    for gid, (old, new) in (("ex1_tool_key", WRONG_KEY), ("ex2_dbos_agent", WRONG_TOOL_STEP),
                            ("ex3_functional", WRONG_TASK)):
        assert old in cells[gid].source, f"{gid} no longer holds {old!r}: the master changed, update this test"
        cells[gid].source = cells[gid].source.replace(old, new)
    path = tmp_path / MASTER.name
    nbformat.write(nb, path)
    report = grade_notebook(path)
    scores = {t.name: t.score for t in report.tests}
    assert report.score < report.max_score
    assert scores["ex1_tool_key_checks"] == 0 and scores["ex2_dbos_agent_checks"] == 0, str(report)
    assert scores["ex3_functional_checks"] == 0, str(report)
    assert scores["ex1_crash_matrix"] == scores["ex2_crash_matrix"] == scores["ex3_crash_matrix"] == 2, \
        "the matrices keep their points"
    assert scores["ex1_restate_matrix"] == 1, "the matrices keep their points"


# --- a failure that is for good is not retried for ever ------------------------------------------------------
def given_module(folder: Path, name: str, monkeypatch):
    """A given file of the master, imported from ``folder`` as the agent process imports it (the world's address
    and state folder are only read, never reached)."""
    import importlib

    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("CRASHLAB_MODEL_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CRASHLAB_STATE_DIR", str(folder))
    for module in ("tool_keys", "pai_order", name):
        monkeypatch.delitem(__import__("sys").modules, module, raising=False)
    return importlib.import_module(name)


def failing(status: int, error_type: str | None = None):
    from crashlab.agent import ToolCallFailed

    def effect(tool, args, key):
        raise ToolCallFailed(f"{tool}: the service answered {status}", status, error_type)
    return effect


def test_the_temporal_agent_gives_up_at_once_on_a_declined_card(lesson_files, monkeypatch):
    from crashlab.agent import ToolCallFailed
    from temporalio.exceptions import ApplicationError

    folder, _ = lesson_files
    workflow = given_module(folder, "pai_temporal_workflow", monkeypatch)
    with pytest.raises(ApplicationError) as refused:
        workflow.no_retry_on_4xx(failing(402, "card_declined"))("charge_card", {}, "k")
    assert refused.value.non_retryable and refused.value.type == "card_declined"
    with pytest.raises(ToolCallFailed):  # a 503 may pass: left to the retry policy
        workflow.no_retry_on_4xx(failing(503))("charge_card", {}, "k")
    model = workflow.durability._model_activity_config
    assert model["heartbeat_timeout"] < model["start_to_close_timeout"], "a dead worker is found by its heartbeat"


def test_the_restate_agent_gives_up_at_once_on_a_declined_card_or_a_refused_model_request(lesson_files, monkeypatch):
    import asyncio

    from crashlab.agent import ToolCallFailed
    from pydantic_ai.exceptions import ModelRequestRejectedError, ModelServerError
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.function import FunctionModel
    from restate import TerminalError

    folder, _ = lesson_files
    order = given_module(folder, "pai_restate_order", monkeypatch)
    with pytest.raises(TerminalError) as refused:
        order.no_retry_on_4xx(failing(402, "card_declined"))("charge_card", {}, "k")
    assert refused.value.status_code == 402
    with pytest.raises(ToolCallFailed):
        order.no_retry_on_4xx(failing(503))("charge_card", {}, "k")

    def model_answering(error):
        def answer(messages, info):
            raise error
        return order.ModelGivesUpOn4xx(FunctionModel(answer))

    ask = [[], None, ModelRequestParameters()]
    with pytest.raises(TerminalError):
        asyncio.run(model_answering(ModelRequestRejectedError("model", "status_code: 400")).request(*ask))
    with pytest.raises(ModelServerError):  # a 5xx may pass: Restate retries the step
        asyncio.run(model_answering(ModelServerError("model", "status_code: 500")).request(*ask))
