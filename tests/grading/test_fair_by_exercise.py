"""Fair by exercise: each exercise's answer cells load on their own, the objects the judge hands to student
code keep the attributes the notebook shows, no library module confirms a graded answer, and in every lesson
exercise 1's points depend on exercise 1's answer alone.

Lesson 11 is the lesson whose answers are cells rather than files. Each case starts from its master and
changes one answer (or two, the first and the last, in one grading: each lost exercise's feedback names its own
mistake), is graded for real (isolated when root, as the grader runs by default), and must score exactly the
points of the exercises it did not touch. The brute-force self-check's grading also holds, isolated, the
grader's boundary: an exercise 1 that tries to read the earlier lessons' files the checks run (one grading, not two).

Exercise 1 in every lesson: read from the masters, no graded check or crash matrix of exercise 1 runs another
exercise's answer file unless the grader lends it the master's copy (``on_reference_answers``); and for lesson 2,
whose exercise 1 matrix runs an agent that imports exercise 2's ``retry.py``, that matrix is run for real with
``retry.py`` left as given and with a syntax error in it, and keeps its points.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

from crashlab.lessons import interview
from crashlab.grading.answer_cells import module_name, write_answer_modules
from crashlab.grading.checks import local_imports, references_for, score_matrix_check
from crashlab.grading.grade import grade_notebook
from crashlab.course.metadata import lesson_meta
from crashlab.course.notebooks import exercise_of, grade_id, is_answer_cell, is_test_cell, written_files
from crashlab.grading.references import lesson_references, reference_value
from crashlab.grading.remote import decode, encode
from crashlab.harness.runs import ProcessRun
from master_files import judge_only, master_value, matrix_check, write_master_files

ROOT = Path(__file__).resolve().parents[2]
LESSON8 = "11_side_by_side.ipynb"
MASTER = nbformat.read(ROOT / "solutions" / LESSON8, as_version=4)
STUDENT = nbformat.read(ROOT / "course" / LESSON8, as_version=4)
POINTS = {"ex1_predict_checks": 4, "ex2_diagnose_checks": 4, "ex3_self_check_checks": 3}


def source_of(nb, gid: str) -> str:
    return next(c for c in nb.cells if grade_id(c) == gid).source


def master_with(**answers: str) -> nbformat.NotebookNode:
    """The master with the answer cells named by grade id replaced."""
    nb = copy.deepcopy(MASTER)
    for gid, source in answers.items():
        next(c for c in nb.cells if grade_id(c) == gid).source = source
    return nb


def grade(nb, folder: Path, **kwargs):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LESSON8
    nbformat.write(nb, path)
    report = grade_notebook(path, **kwargs)
    return report, {t.name: t for t in report.tests}


def assert_only_lost(tests: dict, *lost: str) -> None:
    """Every check not in ``lost`` has its full points; those in ``lost`` have none."""
    assert set(tests) == set(POINTS)
    for name, points in POINTS.items():
        expected = 0 if name in lost else points
        assert tests[name].score == expected, f"{name}: {tests[name].score}/{points}: {tests[name].output}"


# --- each exercise's answer cells load on their own -------------------------------------------------------
def test_a_syntax_error_and_an_exercise_left_as_given_cost_only_their_own_exercises_and_say_where(tmp_path):
    """One grading, two broken exercises: a syntax error in exercise 1's cell (the first, before the others load)
    and exercise 3 left as given (the last). Exercise 2, between them, keeps its points, and each lost exercise's
    feedback names its own mistake, in its own cell: neither is the other's fallout."""
    broken = source_of(MASTER, "ex1_predict").replace('point.split(":", 1)', 'point.split(":", 1', 1)
    assert broken != source_of(MASTER, "ex1_predict")
    report, tests = grade(master_with(ex1_predict=broken, ex3_self_check=source_of(STUDENT, "ex3_self_check")),
                          tmp_path)
    assert report.score == POINTS["ex2_diagnose_checks"], str(report)
    assert_only_lost(tests, "ex1_predict_checks", "ex3_self_check_checks")
    words = tests["ex1_predict_checks"].output
    assert words.startswith("a syntax error") and "answer cell 'ex1_predict', line 3" in words, words
    assert "SyntaxError" in words, words
    assert "NameError" not in words and module_name("ex1_predict") not in words and "/tmp" not in words, words
    words = tests["ex3_self_check_checks"].output
    assert "NotImplementedError" in words and "answer cell 'ex3_self_check', line 3" in words, words
    assert "syntax" not in words.lower() and "ex1_predict" not in words, words


def test_each_answer_cell_is_a_module_that_sees_the_given_imports_and_the_cells_before_it(tmp_path, monkeypatch):
    """A helper written in one answer cell may be used in the next, as in the notebook."""
    monkeypatch.syspath_prepend(str(tmp_path))
    nb = master_with(ex1_predict="def helper():\n    return Path('x').name\n\n\n"
                                 "def predict(agent, point):\n    return 1\n",
                     ex2_diagnose="def diagnose(charges, runs):\n    return helper()\n")
    cells = write_answer_modules(nb, MASTER, tmp_path)
    assert [c["module"] for c in cells] == [module_name(g) for g in ("ex1_predict", "ex2_diagnose", "ex3_self_check")]
    assert cells[0]["names"] == ["predict", "helper"] and cells[2]["names"] == ["my_answers"]
    namespace: dict = {}
    exec((tmp_path / f"{cells[1]['module']}.py").read_text(), namespace)  # noqa: S102 -- the grader's own module
    assert namespace["diagnose"]([], []) == "x"
    for name in [n for n in sys.modules if n.startswith(module_name(""))]:
        monkeypatch.delitem(sys.modules, name)


# --- objects crossing to student code keep their properties ------------------------------------------------
@dataclasses.dataclass
class Timed:
    started: float
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @functools.cached_property
    def minutes(self) -> float:
        return self.seconds / 60

    @property
    def broken(self) -> float:
        raise RuntimeError("not available")

    @property
    def later(self) -> Timed:  # a new record on every read, without end
        return Timed(self.ended, self.ended + 1)


def test_a_dataclass_crosses_with_its_properties():
    run = ProcessRun(pid=7, returncode=-9, started=1.0, ended=3.5, stdout="", stderr="")
    crossed = decode(json.loads(json.dumps(encode([run], lambda v: {"$": "ref", "id": 0}))), lambda d: None)[0]
    assert (crossed.pid, crossed.killed, crossed.seconds) == (7, True, 2.5)
    timed = decode(encode(Timed(0.0, 120.0), lambda v: None), lambda d: None)
    assert (timed.seconds, timed.minutes) == (120.0, 2.0) and not hasattr(timed, "broken")
    assert timed.later.later.seconds == 1.0
    refs = []
    encode(Timed(0.0, 1.0), lambda v: refs.append(v) or {"$": "ref", "id": len(refs)})
    assert len(refs) == 1 and type(refs[0]) is Timed, "the endless chain ends in a reference"


DIAGNOSE_WITH_PROPERTIES = '''def diagnose(charges: list[dict], runs: list) -> str:
    first, second = charges[0], charges[1]
    if first["idempotency_key"] is not None and first["idempotency_key"] == second["idempotency_key"]:
        return "key expired"
    if first["pid"] == second["pid"]:
        return "retry without a key"
    if first["idempotency_key"] and second["idempotency_key"] and first["idempotency_key"] != second["idempotency_key"]:
        return "fresh key per attempt"
    by_pid = {run.pid: run for run in runs}
    a, b = sorted((by_pid[first["pid"]], by_pid[second["pid"]]), key=lambda run: run.started)
    if a.killed:
        return "crash after the effect, no key"
    if b.started < a.started + a.seconds:
        return "concurrent workers"
    return "crash after the effect, no key"
'''


def answer_source(gid: str) -> str:
    return next(c for c in MASTER.cells if grade_id(c) == gid).source


def judged(gid: str, source: str, check: str):
    """Only ``check``, judged on the master with answer cell ``gid`` replaced by ``source``: what these answers
    change is that one check's score (that a changed answer costs only its own exercise is the full gradings'
    business, above and below)."""
    return judge_only(LESSON8, gid, answer_source(gid), source, check)


def test_a_diagnose_that_reads_killed_and_seconds_scores_full_marks():
    result = judged("ex2_diagnose", DIAGNOSE_WITH_PROPERTIES, "ex2_diagnose_checks")
    assert result.score == result.max_score, result.output


# --- no oracle in the library ------------------------------------------------------------------------------
def key() -> dict[str, str]:
    return master_value(ROOT / "solutions" / LESSON8, "ex3_self_check", "my_answers")


def test_the_library_cannot_tell_a_graded_answer_from_a_wrong_one():
    graded = [q for q in interview.BANK if q.qid not in interview.PRACTICE]
    assert graded and set(interview.PRACTICE) and {q.lesson for q in interview.BANK if q.qid in interview.PRACTICE} \
        == {q.lesson for q in interview.BANK}
    for q in graded:
        assert q.answer_hash is None, q.qid
        assert [interview.check({q.qid: letter})[q.qid] for letter in "ABCabc"] == [None] * 6, q.qid
    assert reference_value("ex3_self_check", "my_answers") is None, "outside grading nothing holds the key"


def test_the_practice_questions_check_against_the_masters_key():
    right = key()
    for qid in interview.PRACTICE:
        assert interview.check({qid: right[qid]}) == {qid: True}
        assert [interview.check({qid: letter})[qid] for letter in "ABC"].count(True) == 1, qid


# Asks the library about every choice, and hashes every choice as the library's source does.
BRUTE_FORCE = '''import hashlib
from crashlab.lessons import interview

my_answers = {}
for q in interview.BANK:
    told = [letter for letter in "ABC" if interview.check({q.qid: letter})[q.qid]]
    hashed = [letter for letter in "ABC" if q.answer_hash
              == hashlib.sha256(f"crashlab-interview:{q.qid}:{letter}".encode()).hexdigest()[:16]]
    my_answers[q.qid] = (told or hashed or ["A"])[0]
'''


# A `predict` that reads the earlier lessons' agents, which lesson 10's checks run, and raises with their text: it
# would carry lesson 1's answers out in the feedback, if the process running it could see them.
STEAL_EARLIER_LESSONS = ("import glob, os\n"
                         "def predict(agent, point):\n"
                         "    roots = ['.crashlab', os.environ.get('CRASHLAB_LESSON_FILES', '.'), '/tmp']\n"
                         "    found = [p for r in roots for p in glob.glob(r + '/**/order_log.py', recursive=True)]\n"
                         "    raise RuntimeError('|'.join(open(p).read() for p in found)[:1000] or 'nothing found')\n")


def test_a_notebook_that_tries_every_choice_scores_only_its_honest_points(tmp_path):
    """Exercise 3 asks the library about every letter and hashes every letter: it scores nothing, the others keep
    their points. Isolated (as root, as CI grades), the same grading also holds the grader's boundary: exercise 1's
    `predict` tries to read the earlier lessons' files that this lesson's checks run, and the process running it
    does not see them (one grading for the two attacks; exercise 2, between them, keeps its points)."""
    isolated = os.geteuid() == 0
    answers = {"ex3_self_check": BRUTE_FORCE, **({"ex1_predict": STEAL_EARLIER_LESSONS} if isolated else {})}
    report, tests = grade(master_with(**answers), tmp_path)
    assert_only_lost(tests, "ex3_self_check_checks", *(["ex1_predict_checks"] if isolated else []))
    words = tests["ex3_self_check_checks"].output
    assert "not every letter is the strong answer" in words and "q0" not in words, words
    if isolated:
        assert report.isolated, str(report)
        master_lines = [line.strip() for cell in nbformat.read(ROOT / "solutions" / "01_naive_event_log.ipynb",
                                                               as_version=4).cells
                        if cell.source.startswith("%%writefile order_log.py") for line in cell.source.splitlines()[1:]
                        if len(line.strip()) > 30]
        assert master_lines
        assert not [line for line in master_lines if line in str(report)], str(report)


def test_a_right_answer_in_other_letters_case_scores_full_and_one_wrong_letter_scores_zero():
    right = {qid: letter.lower() for qid, letter in key().items()}
    one_wrong = {**key(), "q02": next(letter for letter in "ABC" if letter != key()["q02"])}
    result = judged("ex3_self_check", f"my_answers = {right!r}\n", "ex3_self_check_checks")
    assert result.score == result.max_score, result.output
    result = judged("ex3_self_check", f"my_answers = {one_wrong!r}\n", "ex3_self_check_checks")
    assert result.score == 0 and "not every letter is the strong answer" in result.output, result.output
    assert not re.search(r"\d", result.output.split("strong answer")[1]), "feedback must not count wrong letters"


# --- the fair side --------------------------------------------------------------------------------------------
def test_the_master_scores_full_marks_not_isolated_too():
    """Isolated (as root), test_grading_all grades this master to full marks; here, run as the grader's own user."""
    report = grade_notebook(ROOT / "solutions" / LESSON8, isolate=False)
    assert report.score == report.max_score == sum(POINTS.values()), str(report)


# --- exercise 1 keeps its points whatever the later exercises hold ---------------------------------------------
def answer_files(master) -> dict[str, int]:
    """Each ``%%writefile`` answer file of ``master`` -> its exercise."""
    return {cell.source.split()[1]: exercise_of(grade_id(cell)) for cell in master.cells
            if is_answer_cell(cell) and cell.source.startswith("%%writefile ") and exercise_of(grade_id(cell))}


def files_named(source: str, folder: Path) -> set[str]:
    """The files of ``folder`` that code names: an import (``import keys``), or a file name (``"keyed_agent.py"``)."""
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.startswith("%")))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {f"{alias.name.split('.')[0]}.py" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(f"{node.module.split('.')[0]}.py")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".py"):
            names.add(node.value)
    return {name for name in names if (folder / name).is_file()}


def runs(folder: Path, named: set[str], lent: set[str]) -> set[str]:
    """Every file of ``folder`` that running ``named`` runs, less the files the grader lends from the master."""
    found = set()
    for name in named - lent:
        found |= {path.name for path in local_imports(folder / name)}
    return found - lent


@pytest.mark.parametrize("master_path", sorted((ROOT / "solutions").glob("*.ipynb")), ids=lambda p: p.stem[:2])
def test_exercise_1s_checks_and_matrices_run_no_other_exercises_answer(master_path, tmp_path):
    master = write_master_files(master_path, tmp_path)
    exercise = answer_files(master)
    references = lesson_references(master)
    lent_all = {name for name, _ in references.values() if name}
    graded = [(grade_id(c), files_named(c.source, tmp_path), lent_all if "on_reference_answers(" in c.source else set())
              for c in master.cells if is_test_cell(c) and exercise_of(grade_id(c)) == 1]
    graded += [(check["name"], {check["agent"]}, {name for name, _ in references_for(check, references).values() if name})
               for check in lesson_meta(master).get("matrix_checks", []) if exercise_of(check["name"]) == 1]
    assert graded or not exercise, "no graded check of exercise 1 found: the reading of the master is wrong"
    for name, named, lent in graded:
        others = sorted(f for f in runs(tmp_path, named, lent) if exercise.get(f, 1) != 1)
        assert not others, f"{master_path.stem} {name} runs {others}, another exercise's answer: lend it the master's"


LESSON2 = ROOT / "solutions" / "02_idempotent_tools.ipynb"
RETRY_AS_GIVEN = next(c.source for c in nbformat.read(ROOT / "course" / LESSON2.name, as_version=4).cells
                      if grade_id(c) == "ex2_retry")


@pytest.mark.parametrize("retry", ["left as given", "a syntax error"])
def test_lesson_2s_exercise_1_matrix_keeps_its_points_with_exercise_2_missing_or_broken(retry, tmp_path):
    """The matrix as the grader runs it (on the master's retry.py), on two crash points to keep it short."""
    master = write_master_files(LESSON2, tmp_path)
    given = written_files(nbformat.from_dict({"cells": [{"cell_type": "code", "source": RETRY_AS_GIVEN,
                                                         "metadata": {}, "outputs": [], "execution_count": None}],
                                              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))["retry.py"]
    (tmp_path / "retry.py").write_text(given if retry == "left as given" else "def call_with_retry(name, args, key:\n")
    check = matrix_check(master, "ex1_crash_matrix", ["after:charge_card", "before:send_confirmation"])
    result = score_matrix_check(check, tmp_path, references=lesson_references(master))
    assert result.score == result.max_score == 4, result.output
    assert "retry.py" not in result.output, result.output
