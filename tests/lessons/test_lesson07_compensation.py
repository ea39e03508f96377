"""The compensation lesson: the grader runs a matrix check through the failure path when it names
``fail``, the lesson's matrix checks are the ones its text promises, and known-wrong answers lose points.

Cheap on purpose: the matrix checks are scored at one or two points (the master's full matrices run when
test_grading_all grades the master); one full grading of a submission with three subtly wrong answers shows
the hidden checks catching each, while the crash matrices, which those mistakes do not touch, keep their points.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from crashlab.grading.grade import grade_notebook, score_matrix_check
from crashlab.course.notebooks import grade_id
from crashlab.harness import crash_row
from crashlab.harness.launcher import WarmLauncher
from master_files import matrix_check, replace_in as replace

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "07_compensation.ipynb"


def test_the_graded_matrices_run_every_point_of_the_failure_path():
    nb = nbformat.read(MASTER, as_version=4)
    checks = {c["name"]: c for c in nb.metadata["crashlab"]["matrix_checks"]}
    assert set(checks) == {"ex1_crash_matrix", "ex2_crash_matrix"}
    for check in checks.values():
        assert check["fail"] == "reserve_item" and check.get("crash_points", "all") == "all"
    assert checks["ex1_crash_matrix"]["resumers"] == 2
    assert all(first != second and all(":" in p for p in (first, second))
               for first, second in checks["ex1_crash_matrix"]["double"]), "double crashes inside the undo"
    assert checks["ex2_crash_matrix"]["on_reference_answers"] and nb.metadata["crashlab"]["reference_answers"] == [
        "ex1_undo"]


def test_a_matrix_check_with_fail_runs_the_failure_path(lesson_files):
    """score_matrix_check passes ``fail`` to crash_test: the keyed saga is cleanly undone, the unkeyed one refunds
    twice and scores 0. Without ``fail`` in the check, the same rows would run the success path."""
    folder, nb = lesson_files
    check = matrix_check(nb, "ex1_crash_matrix", ["after:refund_charge"])
    keyed = score_matrix_check(check, folder)
    assert keyed.score == keyed.max_score, keyed.output
    unkeyed = score_matrix_check({**check, "agent": "naive_compensating_agent.py"}, folder)
    assert unkeyed.score == 0, unkeyed.output
    assert "2 refunds for 1 charge (a double refund)" in unkeyed.output, unkeyed.output


def test_an_unkeyed_compensation_scores_0_for_the_crash_matrix(lesson_files):
    """A known-wrong answer to exercise 1: compensate sends no key, so a resume after the refund refunds again."""
    folder, nb = lesson_files
    replace(folder / "undo.py", "idempotency_key=undo_key(order_id, step)", "idempotency_key=None")
    result = score_matrix_check(matrix_check(nb, "ex1_crash_matrix", ["after:refund_charge"]), folder)
    assert result.score == 0 and "a double refund" in result.output, result.output


def test_a_dbos_undo_without_the_cancellation_scores_0_for_the_crash_matrix(lesson_files):
    """A known-wrong answer to exercise 2: the except block refunds but never tells the customer."""
    folder, nb = lesson_files
    replace(folder / "dbos_saga_agent.py", "        for step in undo_steps(done):\n",
            "        for step in undo_steps(done)[:-1]:  # the cancellation left out\n")
    result = score_matrix_check(matrix_check(nb, "ex2_crash_matrix", ["after:refund_charge"]), folder)
    assert result.score == 0 and "no cancellation sent" in result.output, result.output


def test_the_key_lifetime_answer_protects_the_charge_and_the_reservation_not_the_email(lesson_files):
    """What exercise 3's text says of its answer, as `crash-test --key-lifetime` finds it: resumed after the key
    lifetime, the master's agent charges and reserves once wherever it died, and it sends a second confirmation
    when it died right after the first, since no service says which emails it sent."""
    folder, _ = lesson_files
    agent = folder / "lifetime_agent.py"
    points = ("after:charge_card", "after:reserve_item", "after:send_confirmation")
    with WarmLauncher() as warm, ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(lambda point: crash_row(agent, point, workdir=folder, key_lifetime=1.0, launcher=warm),
                             points))
    for row in rows:
        assert row.reached and row.finished, (row.point, row.problems)
    for row in rows[:2]:
        assert row.duplicates == 0, (row.point, row.effects, row.problems)
    row = rows[2]
    assert (row.effects["charge"], row.effects["reservation"], row.effects["confirmation"]) == (1, 1, 2), row.effects


WRONG_UNDO = '''%%writefile undo.py
import time

from crashlab.agent import ToolCallFailed, call_tool
from undo_requests import undo_args


def undo_key(order_id, step):
    return f"{order_id}:undo:{step}"


def compensate(order_id, step, attempts=5):
    for attempt in range(attempts):
        try:
            return call_tool(step, undo_args(order_id, step), idempotency_key=undo_key(order_id, step))
        except ToolCallFailed:
            if attempt == attempts - 1:  # wrong: a 400 is retried too
                raise
            time.sleep(0.05 * 2 ** attempt)
'''

WRONG_EXCEPT = ("        for step in undo_steps(done):\n",
                "        if getattr(exc, 'status', None) == 400:\n"
                "            raise  # wrong: a 400 leaves the order in ERROR with the money taken\n"
                "        for step in undo_steps(done):\n")

WRONG_CHARGE_ONCE = '''%%writefile charge_once.py
from crashlab.agent import charge_card, list_charges, list_reservations, reserve_item


def charge_once(order_id, amount, key):
    charges = list_charges(order_id)
    if charges:  # wrong: any charge of the order will do, whatever its amount
        return charges[0]
    return charge_card(order_id, amount, idempotency_key=key)


def reserve_once(order_id, sku, key):
    for reservation in list_reservations(order_id):
        if reservation["sku"] == sku:
            return reservation
    return reserve_item(order_id, sku, idempotency_key=key)
'''


def test_subtly_wrong_answers_lose_their_exercises_points_only(tmp_path):
    """Three answers that pass their visible checks and the crash matrices: a compensation that retries a 400,
    a workflow that leaves an order refused with a 400 in ERROR with the money taken, a lookup that takes a charge
    of another amount. The hidden checks catch each; the matrices keep their points."""
    nb = nbformat.read(MASTER, as_version=4)
    cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
    cells["ex1_undo"].source = WRONG_UNDO
    assert WRONG_EXCEPT[0] in cells["ex2_dbos_saga"].source
    cells["ex2_dbos_saga"].source = cells["ex2_dbos_saga"].source.replace(*WRONG_EXCEPT)
    cells["ex3_charge_once"].source = WRONG_CHARGE_ONCE
    path = tmp_path / MASTER.name
    nbformat.write(nb, path)
    report = grade_notebook(path)
    scores = {t.name: t.score for t in report.tests}
    assert report.score < report.max_score
    assert scores["ex1_undo_checks"] == 0 and scores["ex2_dbos_saga_checks"] == 0, str(report)
    assert scores["ex3_charge_once_checks"] == 0, str(report)
    assert scores["ex1_crash_matrix"] == 3 and scores["ex2_crash_matrix"] == 4, "the matrices keep their points"
