"""The long-haul lesson: its measures (a growth exponent read right from a known curve, bytes per turn from a record,
a plot readable at 100 %), the graded matrices are the ones its text promises, placed around the boundaries they
cross, and known-wrong answers lose their own exercise's points: a key from the run id (exercise 1), a turn count
that is not carried into the new run (exercise 2), a summary asked for outside a DBOS step (exercise 3).

Cheap on purpose: the master's checks and matrices run when test_grading_all grades it, and nbval runs its scenes;
here each known-wrong answer runs the one check of its exercise (the judge's own path, master_files.judge_only),
and the wrong summary one crash point of its matrix."""

from pathlib import Path

import nbformat
import pytest

from crashlab.crash_points import boundary_points
from crashlab.engines.temporal.record import external_claims
from crashlab.engines.record import Entry, Record
from crashlab.grading.grade import score_matrix_check
from crashlab.lessons import bytes_by_turn, growth_exponent, growth_plot, one_record
from crashlab.report.figures import DPI, MIN_PT, WIDTH_PX, smallest_font
from master_files import judge_only, matrix_check, replace_in

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "solutions" / "09_long_haul.ipynb"
NAME = MASTER.name


# --- the measures ------------------------------------------------------------------------------------------------
def test_the_exponent_of_a_quadratic_and_a_linear_record():
    turns = range(1, 101)
    assert growth_exponent([500 * n * n + 2000 for n in turns]) == pytest.approx(2.0, abs=0.05)
    assert growth_exponent([700 * n + 300 for n in turns]) == pytest.approx(1.0, abs=0.05)
    with pytest.raises(ValueError, match="at least two"):
        growth_exponent([10.0])


def test_bytes_by_turn_adds_every_entry_up_to_each_turn_s_end():
    entries = (Entry("input", "", 50), Entry("step", "ask_model", 10, 1), Entry("step", "run_tool", 5, 2),
               Entry("step", "ask_model", 20, 3), Entry("step", "run_tool", 5, 4))
    record = Record("dbos", "ORD-BL-001", entries)
    assert bytes_by_turn(record, lambda e: e.name == "run_tool") == [65, 90]
    assert bytes_by_turn(one_record([record, record]), lambda e: e.name == "run_tool") == [65, 90, 155, 180]


def test_external_claims_reads_every_reference_an_event_keeps_and_no_inline_payload():
    from temporalio.api.common.v1 import Payload
    from temporalio.api.history.v1 import HistoryEvent
    from temporalio.api.sdk.v1.external_storage_pb2 import ExternalStorageReference
    from temporalio.converter import JSONProtoPayloadConverter

    def reference(digest: str) -> Payload:  # what the SDK writes in a stored payload's place
        payload = JSONProtoPayloadConverter().to_payload(ExternalStorageReference(driver_name="folder",
                                                                                  claim_data={"sha256": digest}))
        payload.external_payloads.add().size_bytes = 900
        return payload

    event = HistoryEvent()
    scheduled = event.activity_task_scheduled_event_attributes
    scheduled.input.payloads.extend([reference("ab"), Payload(data=b'"kept inline"')])
    scheduled.header.fields["context"].CopyFrom(reference("cd"))  # a map of payloads, deeper in the event
    assert sorted(c["sha256"] for c in external_claims(event)) == ["ab", "cd"]
    assert external_claims(HistoryEvent()) == []


def test_the_growth_plot_is_readable_at_100_percent():
    import matplotlib.pyplot as plt

    curves = {f"linear {k}": [900 * k * n for n in range(1, 210)] for k in range(1, 12)}  # past the colour cycle
    fig = growth_plot({"quadratic": [n * n for n in range(1, 80)], **curves}, "a title", limit=2 * 1024 * 1024,
                      limit_label="a limit")
    try:
        assert fig.get_size_inches()[0] * DPI <= WIDTH_PX and smallest_font(fig) >= MIN_PT
        styles = [(line.get_color(), line.get_linestyle()) for line in fig.axes[0].get_lines() if line.get_label() in curves]
        assert len(set(styles)) == len(curves), "two curves drawn alike"
    finally:
        plt.close(fig)


# --- the graded matrices -------------------------------------------------------------------------------------------
def test_the_graded_matrices_cross_the_boundaries_the_text_names():
    meta = nbformat.read(MASTER, as_version=4).metadata["crashlab"]
    checks = {c["name"]: c for c in meta["matrix_checks"]}
    can, compaction = checks["ex2_crash_matrix"], checks["ex3_crash_matrix"]
    assert can["agent"] == "long_agent.py" and can["needs"] == "temporal" and can["env"] == {"LONG_CAN_EVERY": "9"}
    assert can["on_reference_answers"] == ["ex1_keys"] == meta["reference_answers"], "exercise 2 runs on the master's key"
    # every point is one of the boundary's (a new run after turn 9 of ORD-BL-004's 12), the summary's included
    assert set(can["crash_points"]) <= set(boundary_points(12, 9)) and "after:model#10" in can["crash_points"]
    assert compaction["agent"] == "dbos_compaction.py" and "on_reference_answers" not in compaction
    assert set(compaction["crash_points"]) <= set(boundary_points(12, 6)) and "after:turn#7" in compaction["crash_points"]
    assert {c["expect"] for c in checks.values()} == {"durable"}
    assert {c["order"] for c in checks.values()} == {"ORD-BL-004"}


# --- known-wrong answers lose their own exercise's points ----------------------------------------------------------
RUN_ID_KEY = ('    return f"{workflow_id}/turn-{turn}/{tool}"', '    return f"{run_id}/turn-{turn}/{tool}"')
TURN_NOT_CARRIED = ('"turn": turn, "runs"', '"turn": 0, "runs"')
SUMMARY_OUTSIDE_A_STEP = ("@DBOS.step()\ndef summarise", "def summarise")


@pytest.mark.parametrize("answer, wrong, check, said", [
    ("ex1_keys", RUN_ID_KEY, "ex1_keys_checks", "run id"),
    ("ex2_continue_as_new", TURN_NOT_CARRIED, "ex2_continue_as_new_checks", "failed"),
    ("ex3_summarise", SUMMARY_OUTSIDE_A_STEP, "ex3_summarise_checks", "asked the model again"),
], ids=["run-id key", "turn not carried", "summary outside a step"])
def test_a_known_wrong_answer_scores_0_on_its_exercise_s_check(answer, wrong, check, said):
    result = judge_only(NAME, answer, *wrong, check)
    assert result.score == 0, result.output
    assert said in result.output, result.output


def test_a_summary_outside_a_step_fails_its_matrix_right_after_the_compaction(lesson_files):
    folder, nb = lesson_files
    replace_in(folder / "dbos_compaction.py", *SUMMARY_OUTSIDE_A_STEP)
    result = score_matrix_check(matrix_check(nb, "ex3_crash_matrix", ["after:turn#7"]), folder)
    assert result.score == 0 and "after:turn#7" in result.output and "repeat" in result.output, result.output
