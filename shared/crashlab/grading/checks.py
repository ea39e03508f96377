"""Scoring a submission's checks: the master's checks in the judge, the crash matrices from the world's
ledgers, and -- for lessons that still need it -- checks read from the executed notebook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import nbformat

from crashlab.grading.isolation import Deadline, Isolation
from crashlab.grading.notebooks import grade_id, is_test_cell, nbgrader_meta
from crashlab.grading.report import TestResult

GRADED_ELSEWHERE = "# graded by the grader, outside this kernel: this cell awards nothing here"
JUDGE_SETUP_TAG = "judge-setup"


def checks_in_kernel(master) -> bool:
    """Lessons whose checks still run in the student's kernel (their answers are functions defined in
    cells, or need an engine's test harness in-process); the judge cannot call those across a process
    boundary yet. Their scores come from the executed notebook and are marked as such."""
    return bool(master.metadata.get("crashlab", {}).get("checks_in_kernel"))


def score_kernel_checks(workdir: Path) -> list[TestResult]:
    from nbgrader.utils import determine_grade

    executed = workdir / ".executed.ipynb"
    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:  # noqa: BLE001 -- missing or damaged: nothing ran
        return []
    results = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_test_cell(cell):
            continue
        meta = nbgrader_meta(cell)
        points, name = float(meta["points"]), meta["grade_id"]
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            results.append(TestResult(name, 0.0, points, f"{errors[0].get('ename')}: {errors[0].get('evalue')}"[:1500],
                                      "kernel"))
            continue
        if cell.get("execution_count") is None:
            results.append(TestResult(name, 0.0, points, "this check did not run", "kernel"))
            continue
        score, _ = determine_grade(cell)
        score = points if score is None else float(score)
        results.append(TestResult(name, score, points, "passed (checked in your kernel)" if score == points else
                                  "the check wrote to stderr", "kernel"))
    return results


def blank_test_cells(nb) -> None:
    """The kernel's copies of the checks give the learner feedback; while grading they award nothing,
    so they are not run there at all. The judge runs the master's own copies."""
    for cell in nb.cells:
        if cell.cell_type == "code" and is_test_cell(cell):
            cell.source = GRADED_ELSEWHERE
            cell.outputs = []


def judge_checks(master, isolation: Isolation, deadline: Deadline) -> list[TestResult]:
    tests = [c for c in master.cells if c.cell_type == "code" and is_test_cell(c)]
    if not tests:
        return []
    preamble = "\n".join(c.source for c in master.cells
                         if c.cell_type == "code" and JUDGE_SETUP_TAG in c.metadata.get("tags", []))
    job = {"workdir": str(isolation.workdir), "preamble": preamble,
           "timeout": float(master.metadata.get("crashlab", {}).get("check_timeout", 240)),
           "checks": [{"name": grade_id(c), "source": c.source} for c in tests]}
    env = isolation.env()
    process = subprocess.Popen([sys.executable, "-m", "crashlab.grading.judge"], cwd=isolation.workdir, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    results: dict[str, dict] = {}
    try:
        out, _ = process.communicate(json.dumps(job).encode(), timeout=max(1.0, deadline.left()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
    for line in out.decode(errors="replace").splitlines():
        try:
            result = json.loads(line)
            results[result["name"]] = result
        except (ValueError, KeyError, TypeError):
            continue
    graded = []
    for cell in tests:
        meta = nbgrader_meta(cell)
        points = float(meta["points"])
        result = results.get(meta["grade_id"])
        if result is None:
            why = ("timed out: the submission's deadline passed before this check ran" if deadline.passed
                   else "this check did not complete")
            graded.append(TestResult(meta["grade_id"], 0.0, points, why, "check"))
        else:
            passed = result.get("passed") is True
            graded.append(TestResult(meta["grade_id"], points if passed else 0.0, points,
                                     str(result.get("feedback", ""))[:3000], "check"))
    return graded



def score_matrix_check(check: dict, workdir: Path, needs=None) -> TestResult:
    """Score one crash-matrix check on an agent file in ``workdir`` (``needs``: a shared
    :class:`crashlab.needs.Needs`, so servers such as Temporal start once per grading run)."""
    from crashlab.harness import crash_test
    from crashlab.needs import Needs

    if needs is None:
        with Needs(workdir / ".crashlab" / "servers") as own:
            return score_matrix_check(check, workdir, own)

    name, max_score = check["name"], float(check["points"])
    agent = workdir / check["agent"]
    if not agent.is_file():
        return TestResult(name, 0.0, max_score, f"the notebook did not write {check['agent']}, so there is no agent "
                                                f"to crash-test", "matrix")
    matrix = crash_test(agent, check.get("crash_points", "all"), expect=check.get("expect", "durable"),
                        jobs=int(check.get("jobs", 2)), progress=False, timeout=float(check.get("timeout", 60)),
                        workdir=workdir / ".crashlab" / "grading", resumers=int(check.get("resumers", 1)),
                        double=[tuple(pair) for pair in check.get("double", [])] or None,
                        faults=[tuple(f) for f in check.get("faults", [])] or None,
                        launcher=check.get("launcher", "warm"), preload=tuple(check.get("preload", ())),
                        extra_env=needs.env_for(check))
    ok_rows = sum(row.ok for row in matrix.rows)
    # Safety is all or nothing: one duplicate effect, lost order or avoidable repeat zeroes the check.
    score = max_score if ok_rows == len(matrix.rows) else 0.0
    output = (f"{ok_rows}/{len(matrix.rows)} crash points clean (expected: {matrix.as_dict()['expectation']}); "
              + ("all clean" if score else "any failing crash point scores 0 for this check"))
    problems = matrix.problems()
    if problems:
        output += "\n" + "\n".join(f"- {p}" for p in problems)
    return TestResult(name, score, max_score, output, "matrix")
