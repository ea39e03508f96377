"""The Classroom workflow against GitHub Classroom's two actions as their source runs them (tests/classroom_actions.py):
the reporter finds every runner's result under the name its lookup builds, and each result step's command, run with
only the variables the command-grader passes, counts a results file of this run and refuses a stale one. No
grading: the results files are written as ``crashlab grade --json`` writes them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import classroom_actions as actions
from crashlab.grading.classroom import exercises, masters_of, workflow
from crashlab.grading import report as results

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
COMMITTED = ROOT / ".github" / "workflows" / "classroom.yml"
WORKFLOWS = {
    "the repository's own": lambda: COMMITTED.read_text(),
    "a release of every lesson": lambda: workflow(SOLUTIONS, bundle=True),
    "a release of lesson 02": lambda: workflow(SOLUTIONS, bundle=True, lessons=["02"]),
    "a release of lessons 01-03": lambda: workflow(SOLUTIONS, bundle=True, lessons=["01", "02", "03"]),
}


def outputs_named(workflow_text: str) -> dict[str, str]:
    """Each grader step's output, as a distinct marker, in the expression context."""
    return {f"steps.{step['id']}.outputs.result": f"marker-{step['id']}" for step in actions.graders(workflow_text)}


@pytest.mark.parametrize("which", WORKFLOWS)
def test_the_reporter_finds_every_runners_result_by_its_own_lookup(which):
    text = WORKFLOWS[which]()
    graders = actions.graders(text)
    ids = [step["id"] for step in graders]
    assert ids and len(set(ids)) == len(ids)
    reporter = actions.reporter(text)
    runners = str(reporter["with"]["runners"])
    assert runners.split(",") == ids, "every grader step is a runner, once, in order"
    assert actions.RUNNERS_PATTERN.match(runners), "the reporter would hide a failure's cause behind its own message"
    context = outputs_named(text)
    env = {name: actions.evaluate(value, context) for name, value in reporter["env"].items()}
    for runner in runners.split(","):
        assert env.get(actions.runner_env_name(runner)) == f"marker-{runner}", \
            f"{actions.runner_env_name(runner)} is not the result of step {runner}"
    lessons = sorted({step["with"]["test-name"].split()[0] for step in graders})
    points = sum(points for master in masters_of(SOLUTIONS) if master.stem in lessons for _, points in exercises(master))
    assert sum(int(step["with"]["max-score"]) for step in graders) == points


def test_the_lookup_is_not_vacuous_the_old_names_record_nothing():
    """The names of the workflow before: step ids with hyphens, their results under underscores."""
    old = COMMITTED.read_text().replace("id: lesson01ex1readeventschecks", "id: lesson01-ex1-read-events-checks")
    old = old.replace("LESSON01EX1READEVENTSCHECKS_RESULTS: \"${{steps.lesson01ex1readeventschecks.outputs.result}}",
                      "LESSON01_EX1_READ_EVENTS_CHECKS_RESULTS: \"${{steps.lesson01-ex1-read-events-checks.outputs.result}}")
    old = old.replace("runners: lesson01ex1readeventschecks,", "runners: lesson01-ex1-read-events-checks,")
    assert old != COMMITTED.read_text()
    with pytest.raises(LookupError, match="LESSON01-EX1-READ-EVENTS-CHECKS_RESULTS"):
        actions.report(old, outputs_named(old))
    assert not actions.RUNNERS_PATTERN.match(str(actions.reporter(old)["with"]["runners"]))


def results_file(folder: Path, master: Path, run_id: str, full: set[str]) -> None:
    """``results-STEM.json`` as ``crashlab grade --json`` writes it: the checks in ``full`` with full marks."""
    report = results.GradeReport(master.name, master.stem[:2], run_id=run_id)
    report.tests = [results.TestResult(name, points if name in full else 0, points, "passed" if name in full else "not clean",
                               "check") for name, points in exercises(master)]
    results.write_results(report, folder / f"results-{master.stem}.json", force=True)


def run_as_actions(text: str, workspace: Path, run_id: str, attempt: str) -> tuple[tuple[int, int], list[str]]:
    context = {"github.run_id": run_id, "github.run_attempt": attempt}
    said = []
    for step in actions.graders(text):
        done = actions.run_command_grader(step, workspace, context, os.environ["PATH"], os.environ.get("HOME", "/root"))
        context[f"steps.{step['id']}.outputs.result"] = done.result
        said.append(done.output)
    return actions.report(text, context), said


def workspace_with(tmp_path: Path, venv_at: str) -> Path:
    """A checkout whose ``venv_at`` is this repository's environment (the course's own, or the fetched bundle's)."""
    workspace = tmp_path / "workspace"
    (workspace / venv_at).parent.mkdir(parents=True, exist_ok=True)
    (workspace / venv_at).symlink_to(ROOT / ".venv")
    return workspace


def test_a_result_step_counts_this_runs_results_with_only_the_actions_variables(tmp_path, monkeypatch):
    """Lesson 1 in the repository's own workflow: the command-grader passes no CRASHLAB_RUN_ID (even when the runner
    has one), so the run's id must reach `crashlab result` in the command itself."""
    monkeypatch.setenv("CRASHLAB_RUN_ID", "this-is-not-passed-on")
    text = workflow(SOLUTIONS, lessons=["01"])
    [master] = masters_of(SOLUTIONS, ["01"])
    workspace = workspace_with(tmp_path, ".venv")
    names = [name for name, _ in exercises(master)]
    results_file(workspace, master, "4242-2", full=set(names[:2]))
    (total, maximum), said = run_as_actions(text, workspace, "4242", "2")
    points = dict(exercises(master))
    assert (total, maximum) == (points[names[0]] + points[names[1]], sum(points.values())), said

    results_file(workspace, master, "4242-1", full=set(names))  # the first attempt's file, left behind
    (total, _), said = run_as_actions(text, workspace, "4242", "2")
    assert total == 0 and all("not written by this grading run (4242-2)" in words for words in said), said

    (workspace / f"results-{master.stem}.json").unlink()
    (total, _), said = run_as_actions(text, workspace, "4242", "2")
    assert total == 0 and all("no results file" in words for words in said), said


def test_a_three_lesson_release_records_a_master_a_partial_and_an_unanswered_lesson(tmp_path):
    """Lesson 1 with full marks, lesson 2 with its first exercise only, lesson 3 graded to nothing, each step run
    from the bundle's environment as the release's workflow names it."""
    text = workflow(SOLUTIONS, bundle=True, lessons=["01", "02", "03"])
    first, second, third = masters_of(SOLUTIONS, ["01", "02", "03"])
    workspace = workspace_with(tmp_path, ".grader/.venv")
    results_file(workspace, first, "99-1", full={name for name, _ in exercises(first)})
    ex1 = {name for name, _ in exercises(second) if name.startswith("ex1_")}
    results_file(workspace, second, "99-1", full=ex1)
    results_file(workspace, third, "99-1", full=set())
    (total, maximum), said = run_as_actions(text, workspace, "99", "1")
    points = {m: dict(exercises(m)) for m in (first, second, third)}
    assert maximum == sum(sum(p.values()) for p in points.values())
    assert total == sum(points[first].values()) + sum(points[second][name] for name in ex1), said
