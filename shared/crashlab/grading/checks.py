"""Scoring a submission's checks: the master's checks in the judge, the crash matrices from the world's
ledgers."""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.grading.answer_cells import write_answer_modules
from crashlab.grading.isolation import Deadline, Isolation
from crashlab.grading.references import copy_on_answers, lesson_references, reference_workspace
from crashlab.course.notebooks import exercise_of, grade_id, is_answer_cell, is_test_cell, nbgrader_meta, written_files
from crashlab.grading.report import TestResult
from crashlab.course.metadata import lesson_meta
from crashlab.course.placeholder import placeholder_line, placeholder_words
from crashlab.order import ORDER_ID
from crashlab.plumbing.process_tree import die_with_parent
from crashlab.plumbing.processes import kill_tree

JUDGE_SETUP_TAG = "judge-setup"


def judge_checks(master, submission, isolation: Isolation, deadline: Deadline,
                 on_result: Callable[[str, bool], None] | None = None,
                 on_start: Callable[[str], None] | None = None) -> list[TestResult]:
    """Run the master's checks in the judge; ``on_result(name, passed)`` is told each one as the judge finishes
    it, ``on_start(name)`` as it starts it (a lesson's checks take minutes on a loaded machine: the command line
    says so as they come)."""
    tests = [c for c in master.cells if c.cell_type == "code" and is_test_cell(c)]
    if not tests:
        return []
    try:
        answer_cells = write_answer_modules(submission, master, isolation.workdir)
    except OSError as exc:  # the student's folder is full (its own processes filled it): no check can run there
        return [TestResult(grade_id(c) or "", 0.0, float(nbgrader_meta(c)["points"]),
                           f"not run: your answers could not be written into your folder ({exc.strerror or exc})",
                           "check") for c in tests]
    preamble = "\n".join(c.source for c in master.cells
                         if c.cell_type == "code" and JUDGE_SETUP_TAG in c.metadata.get("tags", []))
    job = {"workdir": str(isolation.workdir), "preamble": preamble,
           "timeout": float(lesson_meta(master).get("check_timeout", 240)),
           "checks": [{"name": grade_id(c), "source": c.source} for c in tests], "answer_cells": answer_cells,
           "student_modules": sorted(name[:-3] for name in written_files(master) if name.endswith(".py")),
           "references": lesson_references(master)}
    job_file, results_file, errors_file = (isolation.private / name for name in ("judge-job.json", "judge-results",
                                                                                "judge-errors"))
    job_file.write_text(json.dumps(job))  # in the grader's own folder: the sandbox user cannot read it
    # A lesson with crash matrices starts the launcher for them anyway: the judge may as well be forked from it.
    process = start_judge(isolation, job_file, results_file, errors_file,
                          start_launcher=bool(lesson_meta(master).get("matrix_checks")))
    results: dict[str, dict] = {}
    out, err = _talk_to_judge(process, results_file, errors_file, deadline, on_result, on_start)
    last_words = cut_at_word((err.decode(errors="replace").strip().splitlines() or [""])[-1], 300)
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
                   else f"this check did not complete ({last_words or 'the judge stopped'})")
            graded.append(TestResult(meta["grade_id"], 0.0, points, why, "check"))
        else:
            passed = result.get("passed") is True
            graded.append(TestResult(meta["grade_id"], points if passed else 0.0, points,
                                     cut_at_word(str(result.get("feedback", "")), 3000), "check"))
    return graded


# What the judge imports before its first check, for the grader's launcher to import once: the judge forked from
# it starts with them (and with the SDK, which the judge's own launcher then needs no interpreter to import).
JUDGE_IMPORTS = ("crashlab.harness", "crashlab.grading.proxies", "crashlab.grading.answer_cells",
                 "crashlab.grading.requirements", "crashlab.grading.references", "crashlab.lessons.kernel")


def start_judge(isolation: Isolation, job_file: Path, results_file: Path, errors_file: Path,
                start_launcher: bool = True):
    """``python -P -m crashlab.grading.judge JOB`` in the student's folder, its stdout to ``results_file`` and its
    stderr to ``errors_file``: forked from this process's kept launcher (no interpreter to start, and no SDK to
    import again for the judge's own agents), or, if that launcher cannot be had -- or is not running and
    ``start_launcher`` is false --, a new interpreter that dies with us. Either way a fresh process in a session
    of its own, with the isolation's environment."""
    from crashlab.harness.launcher import LauncherError, kept_launcher

    try:
        launcher = kept_launcher(JUDGE_IMPORTS, start=start_launcher)
    except LauncherError:
        launcher = None
    if launcher is not None:
        try:
            return launcher.spawn([str(job_file)], isolation.workdir, isolation.env(), results_file, errors_file,
                                  module="crashlab.grading.judge")
        except LauncherError:
            pass
    # -P: the judge runs as root in the student's folder; a `crashlab/` planted there must not be imported
    with open(results_file, "wb") as out, open(errors_file, "ab") as err:
        return subprocess.Popen([sys.executable, "-P", "-m", "crashlab.grading.judge", str(job_file)],
                                cwd=isolation.workdir, env=isolation.env(), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True, preexec_fn=die_with_parent())


def _talk_to_judge(process, results_file: Path, errors_file: Path, deadline: Deadline,
                   on_result: Callable[[str, bool], None] | None,
                   on_start: Callable[[str], None] | None = None) -> tuple[bytes, bytes]:
    """Wait for the judge, telling ``on_start`` each check it starts and ``on_result`` each result as they land in
    ``results_file`` (a lesson's checks take minutes on a loaded machine: the command line says so as they come),
    and stop it at the deadline. Its stdout and stderr, whole."""
    told = 0

    def tell_new() -> None:
        nonlocal told
        lines = _read_bytes(results_file).split(b"\n")[:-1]  # complete lines only
        for line in lines[told:]:
            try:
                result = json.loads(line)
                if "started" in result:
                    if on_start is not None:
                        on_start(str(result["started"]))
                elif on_result is not None:
                    on_result(str(result["name"]), result.get("passed") is True)
            except (ValueError, KeyError, TypeError):
                pass
        told = max(told, len(lines))

    try:
        while True:
            try:
                process.wait(timeout=min(0.25, max(0.0, deadline.left())))
                break
            except subprocess.TimeoutExpired:
                tell_new()
                if deadline.passed:
                    kill_tree(process.pid)  # and whatever it started; nothing if it has just ended
                    process.wait()
                    break
    except BaseException:  # Ctrl-C or SIGTERM of the grader: the judge, in a session of its own, goes too
        kill_tree(process.pid)
        process.wait()
        raise
    tell_new()
    return _read_bytes(results_file), _read_bytes(errors_file)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


# How the harness quotes an agent's last words in a verdict (crashlab.harness.matrix and .verdicts).
_AGENT_WORDS = re.compile(r"(the agent failed first: |the (?:resumed )?agent failed \().*$")


def without_agent_words(problem: str) -> str:
    """A verdict line without what the agent said. An agent run on the master's answers to the exercises it
    builds on could read them beside it and say them in its last words: for those runs only the facts the
    world saw come back. The parentheses the line opened before those words are closed again, once each."""
    def hidden(found: re.Match) -> str:
        before = problem[:found.start()] + found.group(1)
        return found.group(1) + "its output is not shown: this check runs your file with the course's answers to " \
            "the other exercises" + \
            ")" * max(0, before.count("(") - before.count(")"))
    return _AGENT_WORDS.sub(hidden, problem)


def references_for(check: Mapping[str, Any], references: dict | None) -> dict:
    """The master's answers a matrix check runs its agent on: those its ``on_reference_answers`` names (``true``:
    every one the lesson lends), so that each exercise's matrix depends on that exercise's answer alone."""
    wanted = check.get("on_reference_answers")
    if not wanted or not references:
        return {}
    if wanted is True:
        return dict(references)
    unknown = [gid for gid in wanted if gid not in references]
    if unknown:
        raise ValueError(f"{check['name']}: on_reference_answers names {unknown}, which the lesson's "
                         "reference_answers does not lend")
    return {gid: references[gid] for gid in wanted}


def _imported_names(node: ast.AST) -> list[str]:
    """The modules one node imports: ``import x``, ``from x import y``, and a name given to
    ``importlib.import_module`` (a default included: ``import_module(os.environ.get("M", "restate_order"))``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module] if node.module and not node.level else []
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
        return [n.value for arg in node.args for n in ast.walk(arg) if isinstance(n, ast.Constant)
                and isinstance(n.value, str)]
    return []


def own_text(path: Path, most: int = 1 << 22) -> str | None:
    """A student's file as text, read without following a symbolic link (the grader reads it as root), or None
    when it is missing, not a regular file, or not text."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        try:
            return f.read(most).decode()
        except UnicodeDecodeError:
            return None


def local_imports(agent: Path) -> list[Path]:
    """The agent file and every file of its folder it imports, directly or not (its own modules)."""
    seen, todo = [], [agent]
    while todo:
        path = todo.pop()
        text = None if path in seen else own_text(path)
        if text is None:
            continue
        seen.append(path)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            todo += [agent.parent / f"{name.split('.')[0]}.py" for name in _imported_names(node) if name]
    return seen


def placeholders(paths) -> list[str]:
    """Which of these files still hold the student notebook's placeholder, in words: ``keys.py line 6 still has
    the placeholder ...``."""
    found = []
    for path in paths:
        line = placeholder_line(own_text(path) or "")
        if line is not None:
            found.append(placeholder_words(path.name, line))
    return found


def unanswered(agent: Path) -> list[str]:
    """Where the agent's own files (those it imports from its folder) still hold the placeholder."""
    return placeholders(local_imports(agent))


def name_unanswered(tests: list[TestResult], master, workdir: Path) -> None:
    """Put first in a failed check's feedback that its exercise is not answered yet, where its answer files still
    hold their placeholder (and those of earlier exercises, where its words show it ran into one): the one fact
    that explains what the check saw. A check that says so already, or passed, is left as it is."""
    files = {cell.source.split()[1]: exercise_of(grade_id(cell)) for cell in master.cells
             if is_answer_cell(cell) and cell.source.startswith("%%writefile ") and len(cell.source.split()) > 1}
    for test in tests:
        exercise = exercise_of(test.name)
        if test.score >= test.max_score or exercise is None or test.output.startswith("not answered yet"):
            continue
        ran_into = "NotImplementedError" in test.output
        mine = [workdir / name for name, ex in files.items()
                if ex == exercise or (ex is not None and ex < exercise and ran_into)]
        found = placeholders(mine)
        if found:
            test.output = f"not answered yet: {'; '.join(found)}. What the check saw: {test.output}"


def score_matrix_check(check: Mapping[str, Any], workdir: Path, needs=None, references: dict | None = None,
                       deadline: float | None = None, progress: bool = False) -> TestResult:
    """Score one crash-matrix check on an agent file in ``workdir`` (``needs``: a shared
    :class:`crashlab.engines.needs.Needs`, so servers such as Temporal start once per grading run). A check with
    ``on_reference_answers`` runs the agent on ``references`` (:mod:`crashlab.grading.references`); one with
    ``fail`` (``"reserve_item"``) runs it through the failure path, every row to end cleanly undone.
    ``deadline`` (``time.monotonic()``): the submission's; the matrix stops there and scores 0, "timed out"."""
    from crashlab.engines.needs import Needs

    if needs is None:
        with Needs(workdir / ".crashlab" / "servers") as own:
            return score_matrix_check(check, workdir, own, references, deadline, progress)

    name, max_score = check["name"], float(check["points"])
    agent = workdir / check["agent"]
    if not agent.is_file() or agent.is_symlink():
        return TestResult(name, 0.0, max_score, f"the notebook did not write {check['agent']}, so there is no agent "
                                                f"to crash-test", "matrix")
    lent = references_for(check, references)
    if lent:  # in a workspace of the reference user's, as that user: see crashlab.grading.references
        with reference_workspace(workdir) as folder:
            return _matrix_result(check, copy_on_answers(folder / check["agent"], lent), needs, deadline, progress,
                                  on_references=True)
    return _matrix_result(check, agent, needs, deadline, progress, on_references=False)


def _matrix_result(check: Mapping[str, Any], agent: Path, needs, deadline: float | None, progress: bool,
                   on_references: bool) -> TestResult:
    from crashlab.harness import MatrixOptions, crash_test

    name, max_score = check["name"], float(check["points"])
    options = MatrixOptions.from_spec(check)
    matrix = crash_test(agent, options, check.get("order", ORDER_ID), progress=progress, workdir=None,  # the grader's folder
                        extra_env=needs.env_for(check), stop_at_first_failure=True, deadline=deadline)
    if matrix.past_deadline:
        return TestResult(name, 0.0, max_score, f"timed out: the submission's deadline passed during this matrix "
                                                f"({len(matrix.rows)} of {len(matrix.rows) + matrix.not_run} crash "
                                                f"points run, the rest stopped)", "matrix")
    # Safety is all or nothing: one duplicate effect, lost order or avoidable repeat zeroes the check, so the
    # matrix stops at the first failing crash point.
    score = max_score if matrix.ok else 0.0
    ok_rows, run = sum(row.ok for row in matrix.rows), len(matrix.rows)
    if score:
        output = f"{ok_rows}/{run} crash points clean (expected: {matrix.expectation}); all clean"
    else:
        stated = check.get("stated") or ""
        asks = f" -- the exercise asks: \"{stated}\"" if stated else ""
        expected = "" if "expected" in stated.lower() else f" (expected: {matrix.expectation})"  # said once
        output = (f"not clean{asks}{expected}: {run - ok_rows} of the {run} crash points run failed"
                  + (f", and the other {matrix.not_run} were not run" if matrix.not_run else "")
                  + "; any failing crash point scores 0 for this check")
        found = unanswered(agent)
        if found:  # the cause first: the rows below only show what an unanswered exercise does
            runs = "" if all(words.startswith(f"{agent.name} ") for words in found) else f", and {agent.name} runs it"
            output = f"not answered yet: {'; '.join(found)}{runs}, so the crash matrix could not pass. The matrix: {output}"
    problems = matrix.problems()
    if on_references:
        problems = [without_agent_words(p) for p in problems]
    if problems:
        output += "\n" + "\n".join(f"- {p}" for p in problems)
    return TestResult(name, score, max_score, output, "matrix")
