"""The crash harness: real kills at named points, resumes in new processes, and the verdicts it
derives from the world's ledgers.

Agent processes are slow to start (``import anthropic``), so each crash row used by several tests
is run once per module.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from crashlab.world.audit import Audit
from crashlab.harness import (BASELINE, EXPECTATIONS, Matrix, ProcessRun, Row, crash_row, crash_test, judge,
                              resolve_points)
from crashlab.harness.launcher import LauncherError
from crashlab.crash_points import default_points
from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.order import ORDER_ID

AGENTS = Path(__file__).parents[1] / "agents"
NAIVE = AGENTS / "naive_agent.py"
HANG = AGENTS / "hang_agent.py"
HANG_WITH_CHILDREN = AGENTS / "hang_with_children_agent.py"


@pytest.fixture(scope="module")
def naive_row(tmp_path_factory):
    """``naive_row(point)``: the naive agent's crash row at ``point``, run once per module."""
    workdir = tmp_path_factory.mktemp("rows")
    rows: dict[str, Row] = {}

    def get(point: str) -> Row:
        if point not in rows:
            rows[point] = crash_row(NAIVE, point, expect="durable", workdir=workdir)
        return rows[point]

    get.workdir = workdir
    return get


def pid_running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def make_audit(charges=1, reservations=1, confirmations=1, repeated=0, final=True) -> Audit:
    effects = {"charge": [{}] * charges, "reservation": [{}] * reservations, "confirmation": [{}] * confirmations}
    return Audit(ORDER_ID, effects=effects, model_calls=4 + repeated, repeated_model_calls=repeated,
                 final_answer_served=final)


def process(returncode=0, timed_out=False, stderr="") -> ProcessRun:
    return ProcessRun(pid=1234, returncode=returncode, started=0.0, ended=1.0, stdout="", stderr=stderr,
                      timed_out=timed_out)


# --- real crashes ----------------------------------------------------------------------------------

def test_crash_row_really_kills_and_resumes_in_a_new_process(naive_row):
    row = naive_row("before:send_confirmation")
    crashed, resumed = row.runs
    assert row.reached
    assert crashed.killed and crashed.returncode == -9
    assert crashed.crashed_at == "before:send_confirmation"  # what the world saw, not what the agent said
    assert resumed.pid != crashed.pid
    assert resumed.returncode == 0 and not resumed.timed_out
    assert not pid_running(crashed.pid) and not pid_running(resumed.pid)
    assert row.recovery_s == pytest.approx(resumed.seconds)


def test_naive_agent_before_send_confirmation_repeats_a_model_call(naive_row):
    row = naive_row("before:send_confirmation")
    assert row.effects == {"charge": 1, "reservation": 1, "confirmation": 1}
    assert row.duplicates == 0
    assert row.repeated_model_calls == 1
    assert row.finished
    assert len(row.problems) == 1
    assert row.problems[0].startswith("before:send_confirmation: 1 repeated model call")
    assert not row.ok


def test_naive_agent_after_send_confirmation_duplicates_the_confirmation(naive_row):
    row = naive_row("after:send_confirmation")
    assert row.reached and row.runs[0].killed
    assert row.effects == {"charge": 1, "reservation": 1, "confirmation": 2}
    assert row.duplicates == 1
    assert row.finished
    assert "after:send_confirmation: 2 confirmations (1 duplicate)" in row.problems
    assert any("repeated model call" in p for p in row.problems)
    assert not row.ok
    assert sum(e.repeat and e.what == "confirmation" for e in row.events) == 1


def test_after_a_model_call_exactly_one_repeat_is_allowed(naive_row):
    row = naive_row("after:model#2")
    assert row.reached and row.runs[0].killed
    assert row.repeated_model_calls == 1
    assert row.effects == {"charge": 1, "reservation": 1, "confirmation": 1}
    assert row.finished
    assert row.problems == []
    assert row.ok


def test_a_point_never_reached_is_a_problem(tmp_path):
    point = "before:model#9"
    row = crash_row(NAIVE, point, workdir=tmp_path)
    assert not row.reached
    assert [run.returncode for run in row.runs] == [0]  # it ran to the end, no resume
    assert row.problems == [f"{point}: crash point never reached (the agent finished without passing through it)"]
    assert not row.ok
    assert row.recovery_s is None


def test_a_point_no_run_can_reach_is_refused_in_one_line_before_any_run(tmp_path):
    """A tool that does not exist is no point at all: the one type refuses it, the row and the world alike, rather
    than a whole run reporting it never reached."""
    with pytest.raises(ValueError, match="unknown tool 'refund': did you mean before:refund_charge"):
        crash_row(NAIVE, "before:refund", workdir=tmp_path)
    from crashlab.world import World

    with pytest.raises(ValueError, match="unknown tool"):  # refused before the world is asked anything
        World(tmp_path, port=1, pid=0).arm_crash("after:refund", run=object())


def test_a_row_in_a_folder_not_made_yet_makes_it():
    """A lesson's check names its folder; in a notebook whose demonstrations were skipped nothing made it yet,
    and the row, not a FileNotFoundError, is what the learner must see."""
    with tempfile.TemporaryDirectory() as scratch:
        row = crash_row(NAIVE, "before:model#9", workdir=Path(scratch) / "lesson" / "not-made")
        assert not row.reached and (Path(scratch) / "lesson" / "not-made").is_dir()


def test_an_agent_that_hangs_before_the_point_is_killed_and_reported(tmp_path):
    row = crash_row(HANG, "before:model#2", timeout=3, workdir=tmp_path)
    [run] = row.runs
    assert run.timed_out
    assert run.returncode == -9
    assert run.seconds >= 3  # not killed before its timeout (how long after is the machine's business)
    assert not pid_running(run.pid)
    assert row.problems == ["before:model#2: crash point never reached (the agent hung before reaching it)"]


def test_an_agent_that_hangs_on_resume_is_killed_and_reported(tmp_path):
    row = crash_row(HANG, "before:model#1", timeout=8, workdir=tmp_path, keep=True)  # room for a slow start
    [base] = tmp_path.iterdir()
    assert not (base / "world" / "world.json").exists()  # the row's world was stopped
    crashed, resumed = row.runs
    assert row.reached and crashed.killed and not crashed.timed_out and crashed.crashed_at == "before:model#1"
    assert resumed.timed_out and resumed.returncode == -9
    assert resumed.seconds >= 8  # not killed before its timeout; how long after is the machine's business
    print(f"the hung resume was killed {resumed.seconds:.1f} s after it started (timeout 8 s)")
    assert not pid_running(resumed.pid)
    assert "before:model#1: the resumed agent hung and was killed after its timeout" in row.problems
    assert not row.finished


def test_a_hung_agent_whose_children_hold_its_pipes_is_killed_with_them(tmp_path):
    """With the exec launcher the harness reads the agent's pipes. Its children -- one in its group, one in
    a session of its own, one a daemon -- hold them too, and a fourth has left its group without them; the
    row must still end within a bound, report the hang, and leave none of them running."""
    pid_file = tmp_path / "pids"
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(crash_row, HANG_WITH_CHILDREN, "before:model#1", launcher="exec", timeout=5,
                             workdir=tmp_path, extra_env={"HANG_CHILD_PIDS": str(pid_file)})
        try:
            row = future.result(timeout=40)
        finally:
            children = [int(pid) for pid in pid_file.read_text().split()] if pid_file.exists() else []
            left = [pid for pid in children if pid_running(pid)]
            for pid in left:  # a failing run must not keep the test run waiting too
                os.kill(pid, signal.SIGKILL)
    [run] = row.runs
    assert len(children) == 4 and left == []
    assert run.timed_out and run.returncode == -9 and run.seconds >= 5  # killed at its timeout, not before
    print(f"the hung agent and its pipe holders were ended {run.seconds:.1f} s after it started (timeout 5 s)")
    assert "started four sleepers" in run.stdout  # what it wrote is still collected
    assert row.problems == ["before:model#1: crash point never reached (the agent hung before reaching it)"]


def test_crash_rows_remove_their_worlds_unless_kept(naive_row):
    naive_row("after:model#2")
    assert list(naive_row.workdir.iterdir()) == []


def test_small_crash_test(tmp_path):
    matrix = crash_test(NAIVE, "after:model#1", jobs=2, progress=False, workdir=tmp_path)
    assert [row.point for row in matrix.rows] == [BASELINE, "after:model#1"]
    baseline, row = matrix.rows
    assert [run.returncode for run in baseline.runs] == [0]
    assert (baseline.model_calls, baseline.repeated_model_calls, baseline.duplicates) == (4, 0, 0)
    assert baseline.finished and baseline.ok
    assert row.reached and row.runs[0].killed and row.repeated_model_calls == 1
    assert matrix.ok and matrix.problems() == []
    assert matrix.row("after:model#1") is row


def test_stop_at_first_failure_runs_no_row_after_the_first_failing_one(tmp_path):
    """The grader's matrices are all or nothing: after the first failing row, the rest are not run."""
    points = ["after:charge_card", "after:reserve_item", "after:send_confirmation"]
    matrix = crash_test(NAIVE, points, baseline=False, jobs=1, progress=False, workdir=tmp_path,
                        stop_at_first_failure=True)
    assert [row.point for row in matrix.rows] == ["after:charge_card"]
    assert matrix.rows[0].duplicates == 1 and not matrix.rows[0].ok
    assert matrix.not_run == 2 and not matrix.ok
    assert "2 more crash points not run" in str(matrix) and matrix.as_dict()["not_run"] == 2


def test_a_stop_set_from_another_thread_ends_the_rows_running_at_once(tmp_path):
    """The demo runs matrices in worker threads, where its Ctrl-C never arrives: ``stop`` ends the rows running
    (here a hung agent, far inside its timeout) and starts no other, instead of the pool waiting for the matrix."""
    import threading

    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    matrix = crash_test(HANG, "before:model#2", jobs=1, timeout=600, progress=False, workdir=tmp_path, stop=stop,
                        launcher="exec")  # no warm launcher to start first: the stop lands on a running row
    assert matrix.rows == [] and matrix.not_run == 2 and not matrix.ok


def test_a_crash_test_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    """Its rows, its worlds and the warm launcher's output folders are all made in the temporary folder;
    all of them go when the run ends, and when it fails (here: a preload that cannot be imported)."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    matrix = crash_test(NAIVE, "after:model#1", jobs=2, progress=False)
    assert matrix.ok, matrix.problems()
    assert list(private.iterdir()) == []
    with pytest.raises(LauncherError, match="crashlab_no_such_module"):
        crash_test(NAIVE, "after:model#1", progress=False, preload=("crashlab_no_such_module",))
    assert list(private.iterdir()) == []


def test_crash_test_rejects_a_missing_agent_and_a_bad_expectation(tmp_path):
    with pytest.raises(FileNotFoundError):
        crash_test(tmp_path / "no_agent.py", progress=False)
    with pytest.raises(ValueError, match="expect"):
        crash_test(NAIVE, expect="perfect", progress=False)


# --- judge -------------------------------------------------------------------------------------------

def test_judge_clean_run_has_no_problem():
    assert judge("before:charge_card", make_audit(), True, process(), "durable") == []


def test_judge_counts_repeats_against_the_window():
    assert judge("after:model#3", make_audit(repeated=1), True, process(), "durable") == []
    [problem] = judge("after:model#3", make_audit(repeated=2), True, process(), "durable")
    assert problem.startswith("after:model#3: 2 repeated model call(s)") and "unavoidable window" in problem
    [problem] = judge("after:reserve_item", make_audit(repeated=1), True, process(), "durable")
    assert problem.startswith("after:reserve_item: 1 repeated model call(s)")
    assert "unavoidable" not in problem


def test_judge_duplicates_by_expectation():
    audit = make_audit(charges=2)
    assert judge("after:charge_card", audit, True, process(), "durable") == [
        "after:charge_card: 2 charges (1 duplicate)"]
    assert judge("after:charge_card", audit, True, process(), "no-repeats") == []
    assert judge("after:charge_card", make_audit(charges=2, repeated=3, final=False), True,
                 process(returncode=1, stderr="boom\n"), "observe") == ["after:charge_card: the resumed agent "
                                                                        "failed (boom)"]


def test_judge_unfinished_and_failed_runs():
    problems = judge("before:reserve_item", make_audit(reservations=0, confirmations=0), True,
                     process(returncode=2, stderr="error: nope\n"), "durable")
    assert problems == ["before:reserve_item: the resumed agent failed (error: nope)",
                        "before:reserve_item: the order did not finish (missing reservation, confirmation)"]
    assert judge("after:model#4", make_audit(final=False), True, process(), "durable") == [
        "after:model#4: the order did not finish (the model never gave its final answer)"]
    assert judge("after:model#4", make_audit(), True, process(timed_out=True, returncode=-9), "durable") == [
        "after:model#4: the resumed agent hung and was killed after its timeout"]


def test_judge_leaves_unreached_points_to_the_caller():
    assert judge("before:model#9", make_audit(charges=3, final=False), False, process(), "durable") == []


# --- points ---------------------------------------------------------------------------------------------

def test_all_points():
    points = resolve_points("all")
    assert len(points) == 14 == len(set(points))
    assert points == default_points()
    assert points[:4] == ["before:model#1", "after:model#1", "before:charge_card", "after:charge_card"]
    assert points[-2:] == ["before:model#4", "after:model#4"]
    for tool in ("charge_card", "reserve_item", "send_confirmation"):
        assert f"before:{tool}" in points and f"after:{tool}" in points


def test_points_from_a_string_or_a_list():
    assert resolve_points(" before:model#1, after:charge_card ,") == ["before:model#1", "after:charge_card"]
    assert resolve_points(["after:model#2"]) == ["after:model#2"]


@pytest.mark.parametrize("points", ["model#1", "during:model#1", "before-model#1", ["before:model#1", "crash"],
                                    "all,before:model#1"])
def test_invalid_points_raise_value_error(points):
    with pytest.raises(ValueError, match="before:OP or after:OP"):
        resolve_points(points)


@pytest.mark.parametrize("point, why", [("before:nosuchtool", "unknown tool 'nosuchtool'"),
                                         ("after:charge", "did you mean after:charge_card"),
                                         ("before:model#0", "counted from 1")])
def test_a_point_no_run_can_reach_is_refused_before_any_run(point, why):
    with pytest.raises(ValueError, match=why):
        resolve_points([point])


@pytest.mark.parametrize("point, fail, why", [
    ("after:refund_charge", None, "refund_charge is an undo step, called only when a step fails for good"),
    ("before:send_cancellation", None, "give the failure too"),
    ("after:send_confirmation", "reserve_item", "when reserve_item fails for good .* send_confirmation is never called"),
    ("after:release_item", "reserve_item:out_of_stock", "release_item is never called"),
])
def test_a_point_off_the_path_the_rows_take_is_refused_before_any_run(point, fail, why):
    with pytest.raises(ValueError, match=why):
        resolve_points([point], fail)


def test_the_points_of_the_path_the_rows_take_are_accepted():
    assert resolve_points("after:refund_charge,after:send_cancellation", "reserve_item") == [
        "after:refund_charge", "after:send_cancellation"]
    assert resolve_points(["after:release_item", "after:model#2"], "send_confirmation") == [
        "after:release_item", "after:model#2"]
    assert resolve_points(["before:model#9"]) == ["before:model#9"]  # an agent may ask the model more often


@pytest.mark.parametrize("points", ["before:", "after: "])
def test_a_point_without_an_op_is_invalid(points):
    with pytest.raises(ValueError):
        resolve_points([points])


# --- the matrix --------------------------------------------------------------------------------------

def synthetic_matrix(expect="durable") -> Matrix:
    clean = Row(BASELINE, True, {"charge": 1, "reservation": 1, "confirmation": 1}, 0, 4, 0, True, None)
    bad = Row("after:send_confirmation", True, {"charge": 1, "reservation": 1, "confirmation": 2}, 1, 5, 1, True,
              1.234, problems=["after:send_confirmation: 2 confirmations (1 duplicate)"],
              runs=[process(returncode=-9), process()])
    lost = Row("before:model#9", False, {"charge": 1, "reservation": 1, "confirmation": 1}, 0, 4, 0, True, None,
               problems=["before:model#9: crash point never reached (x)"])
    return Matrix(str(NAIVE), ORDER_ID, expect, [clean, bad, lost], 3.5)


def test_matrix_table_has_a_header_and_one_line_per_row():
    matrix = synthetic_matrix()
    lines = matrix.table().splitlines()
    assert len(lines) == 2 + len(matrix.rows)
    assert lines[0].split()[:2] == ["crash", "point"] and lines[0].rstrip().endswith("verdict")
    assert set(lines[1].replace(" ", "")) == {"-"}
    for line, row in zip(lines[2:], matrix.rows):
        assert line.startswith(row.point)
        assert line.rstrip().endswith("ok" if row.ok else "FAIL")
    assert "1.23 s" in lines[3]
    assert lines[4].split()[1] == "NO"
    assert all(len(line.rstrip()) <= len(lines[1]) for line in lines)  # columns fit the rule


def test_matrix_verdicts_and_text():
    matrix = synthetic_matrix()
    assert not matrix.ok
    assert matrix.problems() == matrix.rows[1].problems + matrix.rows[2].problems
    text = str(matrix)
    assert text.startswith(f"naive_agent.py on {ORDER_ID}\nexpected: {EXPECTATIONS['durable']}\n")
    assert "- after:send_confirmation: 2 confirmations (1 duplicate)" in text
    observe = synthetic_matrix("observe").table().splitlines()
    assert "verdict" not in observe[0] and len(observe) == 5


def test_a_failure_path_row_with_a_duplicate_never_reads_clean_beside_its_fail():
    """The audit nets a refund sent twice to zero ("cleanly undone"); the table must not print that next to FAIL."""
    twice = Row("after:refund_charge", True, {"charge": 1, "refund": 2}, 1, 3, 0, True, 0.5,
                problems=["after:refund_charge: 2 refunds (1 duplicate)"], verdict="cleanly undone")
    clean = Row(BASELINE, True, {"charge": 1, "refund": 1}, 0, 3, 0, True, None, verdict="cleanly undone")
    table = Matrix(str(NAIVE), ORDER_ID, "durable", [clean, twice], 1.0, fail="reserve_item").table().splitlines()
    assert "cleanly undone" in table[2] and table[2].rstrip().endswith("ok")
    assert "cleanly" not in table[3] and "undone, 1 dup" in table[3] and table[3].rstrip().endswith("FAIL")


def test_a_rows_problems_quoted_in_a_message_read_as_sentences():
    row = Row("after:charge_card", True, {"charge": 2}, 1, 4, 0, True, 0.5,
              problems=["after:charge_card: 2 charges (1 duplicate)", "after:charge_card: the resumed agent failed (x)"])
    assert f"{row.problems}" == "after:charge_card: 2 charges (1 duplicate); after:charge_card: the resumed agent failed (x)"
    assert str(AssertionError(row.problems)) == f"{row.problems}" and row.problems == list(row.problems)
    assert json.loads(json.dumps(row.as_dict()))["problems"] == list(row.problems)


@pytest.mark.parametrize("text, width", [("cannot reach the server (Os { code: 111, kind: ConnectionRefused })", 30),
                                          ("one two\nthree four five six", 16), ("short", 10),
                                          ("Averyveryverylongtokenwithoutanyspace", 12)])
def test_a_bounded_message_is_cut_after_a_whole_word(text, width):
    cut = cut_at_word(text, width)
    assert len(cut) <= width
    if len(text) <= width:
        assert cut == text
    else:
        kept = cut.removesuffix(" [...]")
        assert cut.endswith(" [...]") and text.startswith(kept)
        assert " " not in kept or text[len(kept)] in " \n", f"cut inside a word: {cut!r}"


def test_matrix_write_json_round_trips(tmp_path):
    matrix = synthetic_matrix()
    path = tmp_path / "results.json"
    matrix.write_json(path)
    data = json.loads(path.read_text())
    assert data == matrix.as_dict()
    assert data["ok"] is False and data["expectation"] == EXPECTATIONS["durable"]
    assert [row["point"] for row in data["rows"]] == [BASELINE, "after:send_confirmation", "before:model#9"]
    assert data["rows"][1]["recovery_s"] == 1.234
    assert data["rows"][1]["runs"][0] == {"pid": 1234, "returncode": -9, "seconds": 1.0, "timed_out": False}
    assert os.path.getsize(path) > 0
