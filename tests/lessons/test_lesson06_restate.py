"""The Restate lesson: the graded matrix is the one its text promises, and known-wrong answers lose
their own exercise's points only -- a handler with a side effect outside ``ctx.run`` or ``uuid4()`` keys scores 0
on the crash matrix (the second inside the one full grading), a step that drops the key or an approval timed by
asyncio.wait_for loses its exercise.

Cheap on purpose: the master's full matrix runs when test_grading_all grades the master, and nbval runs its
scenes (a crash, two resumers, the awakeable surviving a kill, a journal mismatch, two deployments). Here the
matrix checks run one or two crash points, and one full grading shows the wrong answers each losing their points.
"""

from pathlib import Path

import nbformat
import pytest

from crashlab.grading.grade import grade_notebook, score_matrix_check
from crashlab.course.notebooks import grade_id
from master_files import judge_only, matrix_check, replace_in as replace

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "06_restate.ipynb"
pytestmark = pytest.mark.needs_restate
MODEL_STEP = 'await ctx.run_typed(f"model#{turn}", ask_model, STEP, messages=messages)'
TOOL_STEP = 'await ctx.run_typed(call["name"], run_tool, STEP, name=call["name"], args=call["input"], key=key)'
KEY = """key = f"{ctx.request().id}/{turn}/{call['name']}\""""
UUID_KEY = "key = str(__import__('uuid').uuid4())"
NO_TURN_KEY = """key = f"{ctx.request().id}/{call['name']}\""""
# Right keys spelled otherwise: Restate's deterministic uuid (the text names it), the model's tool_use id (journaled
# with the model's reply, so a replay sees the same one).
OTHER_RIGHT_KEYS = {"ctx.uuid()": "key = str(ctx.uuid())", "the tool_use id": 'key = call["id"]'}


def test_the_graded_matrix_is_every_point_with_two_resumers_and_double_crashes():
    nb = nbformat.read(MASTER, as_version=4)
    meta = nb.metadata["crashlab"]
    check, = meta["matrix_checks"]
    assert check["name"] == "ex2_crash_matrix" and check["needs"] == "restate" and check.get("crash_points", "all") == "all"
    assert check["resumers"] == 2 and len(check["double"]) >= 2 and check["expect"] == "durable"
    assert check["on_reference_answers"] and meta["reference_answers"] == ["ex1_steps", "restate_agent_given"]
    demo, = meta["demo_agents"]
    assert demo["agent"] == check["agent"] == "restate_agent.py" and demo["needs"] == "restate"


def test_a_side_effect_outside_ctx_run_scores_0_for_the_crash_matrix(lesson_files):
    """The model and the tools called in the handler body: nothing journaled, so a resume asks the model again."""
    folder, nb = lesson_files
    replace(folder / "restate_order.py", MODEL_STEP, "ask_model(messages)")
    replace(folder / "restate_order.py", TOOL_STEP, 'run_tool(call["name"], call["input"], key)')
    result = score_matrix_check(matrix_check(nb, points=["before:reserve_item"], double=[]), folder)
    assert result.score == 0 and "repeated model call" in result.output, result.output


APPROVAL_WAIT = "    match await restate.select(approval=approval, timeout=ctx.sleep(timedelta(seconds=timeout_s))):\n"
# A timer in the process, not in the journal: a refusal and a timeout still end the order, but a crash forgets it.
ASYNCIO_TIMER = """    import asyncio

    try:
        approved = await asyncio.wait_for(approval, timeout_s)
    except asyncio.TimeoutError:
        return "approval timed out"
    return "approved" if approved else "rejected"
"""


def test_wrong_answers_lose_their_own_exercises_points_only(tmp_path):
    """A step that drops its key (exercise 1), a handler with uuid4() keys that passes its checks on a clean run
    (exercise 2: its matrix), an approval whose deadline is asyncio.wait_for, not a durable timer (exercise 3).
    Each loses its own points."""
    nb = nbformat.read(MASTER, as_version=4)
    cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
    steps = cells["ex1_steps"].source
    assert "return call_tool(name, args, idempotency_key=key)" in steps
    cells["ex1_steps"].source = steps.replace("return call_tool(name, args, idempotency_key=key)",
                                              "return call_tool(name, args)  # wrong: no key")
    approval = cells["ex3_approval"].source
    assert KEY in cells["ex2_handler"].source and APPROVAL_WAIT in approval
    cells["ex2_handler"].source = cells["ex2_handler"].source.replace(KEY, UUID_KEY)
    cells["ex3_approval"].source = (approval.split(APPROVAL_WAIT)[0] + ASYNCIO_TIMER
                                    + "    # END SOLUTION" + approval.split("# END SOLUTION")[1])
    path = tmp_path / MASTER.name
    nbformat.write(nb, path)
    report = grade_notebook(path)
    scores = {t.name: t.score for t in report.tests}
    assert scores == {"ex1_steps_checks": 0, "ex2_handler_checks": 3, "ex3_approval_checks": 0,
                      "ex2_crash_matrix": 0}, str(report)
    ex3 = next(t for t in report.tests if t.name == "ex3_approval_checks")
    assert "durable timer" in ex3.output, ex3.output


def test_a_key_without_the_turn_loses_the_handler_checks():
    """The same tool asked for in two turns is two steps; a key of the invocation and the tool alone makes them one.
    The crash matrix cannot see it (the order asks for each tool once), so the handler's checks must."""
    result = judge_only(MASTER.name, "ex2_handler", KEY, NO_TURN_KEY, "ex2_handler_checks")
    # run on the course's answers to the other exercises, the check names its requirement and quotes nothing of the run
    assert result.score == 0 and "[R6] the same tool in two turns is two steps" in result.output, result.output


@pytest.mark.parametrize("key", OTHER_RIGHT_KEYS.values(), ids=OTHER_RIGHT_KEYS.keys())
def test_a_key_spelled_otherwise_passes_the_handler_checks(key):
    result = judge_only(MASTER.name, "ex2_handler", KEY, key, "ex2_handler_checks")
    assert result.score == result.max_score, result.output


PROBE_4XX = """
import json
import sys
from restate import TerminalError
from order_steps import ask_model
from crashlab.agent import ModelCallFailed
for messages in json.loads(sys.argv[1]):
    try:
        ask_model(messages)
        print("answered")
    except TerminalError as exc:
        print("terminal", exc.status_code)
    except ModelCallFailed as exc:
        print("retryable" if exc.retryable else "not terminal", exc.status)
"""


def test_a_model_4xx_fails_the_step_for_good_and_a_5xx_is_retried(lesson_files):
    """Restate retries every exception but a TerminalError, with no limit under the lesson's RunOptions: a 400 from
    the model (a malformed conversation) would be sent again for ever. A 5xx must stay an ordinary error, so that
    Restate does retry it."""
    import json
    import os
    import subprocess
    import sys

    from crashlab.world import World

    folder, _ = lesson_files
    outcomes = []
    with World.start(folder / "world") as world:
        for messages in ([], [{"role": "user", "content": "Process order ORD-8842."}]):  # a 400; then a 529
            probe = subprocess.run([sys.executable, "-c", PROBE_4XX, json.dumps([messages])], cwd=folder, text=True,
                                   capture_output=True, env={**os.environ, **world.env()}, timeout=60)
            outcomes.append(probe.stdout.strip() or probe.stderr[-2000:])
            world.flaky(30, status=503, model_status=529)
    assert outcomes == ["terminal 400", "retryable 529"], outcomes
