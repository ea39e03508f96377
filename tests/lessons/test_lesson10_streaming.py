"""The streaming lesson: its graded matrices reach inside the streams its text names, its helpers say what the user saw
and what a chunk costs, and known-wrong answers lose their own exercise's points only -- a relay without addresses
and a reader that restarts from zero (one grading for both: every other exercise keeps its points), a relay whose
offsets come from a counter that starts again in every process (its exercise's check and one row of its matrix).

Cheap on purpose: the master's checks and matrices run when test_grading_all grades it, and nbval runs its scenes."""

from pathlib import Path

import nbformat

from crashlab.course.notebooks import grade_id
from crashlab.crash_points import CrashPoint
from crashlab.grading.grade import grade_notebook, score_matrix_check
from crashlab.lessons import cost_lines
from master_files import judge_only, matrix_check, replace_in

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "10_streaming.ipynb"
NAME = MASTER.name


def test_the_graded_matrices_kill_the_agents_inside_the_streams():
    meta = nbformat.read(MASTER, as_version=4).metadata["crashlab"]
    checks = {c["name"]: c for c in meta["matrix_checks"]}
    relay, dbos = checks["ex1_crash_matrix"], checks["ex3_crash_matrix"]
    assert relay["agent"] == "stream_agent.py" and "on_reference_answers" not in relay
    assert dbos["agent"] == "dbos_stream_agent.py" and dbos["on_reference_answers"] == ["ex2_reader"] \
        == meta["reference_answers"], "exercise 3 runs on the master's reader"
    for check in checks.values():
        points = [CrashPoint.parse(p) for p in check["crash_points"]]
        assert sum(p.chunk is not None for p in points) == 2, "a point inside the first and the last answer's stream"
        assert "before:charge_card" in check["crash_points"], "a point between turns catches a reader from zero"
        assert check["expect"] == "durable"


def test_the_cost_lines_read_the_run_s_own_figures():
    lines = cost_lines({"floor": 0.001, "screen": 0.004, "dbos step": 0.002}, {"floor": "the floor"})
    assert lines[0].startswith("the floor") and "1.0 x the floor" in lines[0]
    assert "4.0 x the floor" in lines[2] and lines[-1] == "dearest on this run: screen, 4.0 times an append and fsync"


# --- known-wrong answers lose their own exercise's points ----------------------------------------------------------
ADDRESSED = "            show(order_id, event.delta.text, turn=turn, chunk=chunk, attempt=attempt)"
NO_ADDRESS = ("            if screen_cursor(order_id)[\"attempts\"].get(str(turn)) not in (None, attempt):\n"
              "                retract(order_id, turn)  # the user saw part of a reply that died with its process",
              "            pass  # wrong: nothing withdrawn")
CURSOR = '    where = screen_cursor(order_id, stream)\n    offset, attempts = where["next_offset"], dict(where["attempts"])'
FROM_ZERO = '    where = screen_cursor(order_id, stream)\n    offset, attempts = 0, {}  # wrong: from zero'
# wrong: one stream's offsets, counted by the process (a counter kept in the module, new in each process)
COUNTER = (ADDRESSED, "            show(order_id, event.delta.text, stream='answer',\n"
                      "                 offset=next(globals().setdefault('OFFSETS', __import__('itertools').count())))")


def test_a_relay_without_addresses_and_a_reader_from_zero_lose_their_own_exercises_points_only(tmp_path):
    nb = nbformat.read(MASTER, as_version=4)
    cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
    for gid, old, new in (("ex1_relay", ADDRESSED, "            show(order_id, event.delta.text)  # wrong"),
                          ("ex1_relay", *NO_ADDRESS), ("ex2_reader", CURSOR, FROM_ZERO)):
        assert old in cells[gid].source, f"{gid} no longer holds {old!r}: the master changed, update this test"
        cells[gid].source = cells[gid].source.replace(old, new)
    path = tmp_path / NAME
    nbformat.write(nb, path)
    report = grade_notebook(path)
    scores = {t.name: t.score for t in report.tests}
    outputs = {t.name: t.output for t in report.tests}
    assert scores["ex1_relay_checks"] == 0 and "shown twice" in outputs["ex1_relay_checks"], str(report)
    assert scores["ex1_crash_matrix"] == 0 and "shown twice" in outputs["ex1_crash_matrix"], str(report)
    assert scores["ex2_reader_checks"] == 0, str(report)
    assert scores["ex3_dbos_stream_checks"] == 3 and scores["ex3_crash_matrix"] == 3, \
        f"exercise 3 runs on the master's reader and keeps its points: {report}"


def test_offsets_from_a_counter_in_the_process_lose_exercise_1_s_points(lesson_files):
    result = judge_only(NAME, "ex1_relay", *COUNTER, "ex1_relay_checks")
    assert result.score == 0 and "identity reused" in result.output, result.output
    folder, nb = lesson_files
    replace_in(folder / "relay.py", *COUNTER)
    matrix = score_matrix_check(matrix_check(nb, "ex1_crash_matrix", ["before:charge_card"]), folder)
    assert matrix.score == 0 and "identity reused" in matrix.output, matrix.output
