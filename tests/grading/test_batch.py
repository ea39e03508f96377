"""grade-batch grades a class into a gradebook, resumably: ten students' folders on a two-exercise course (the
grader itself is proved on the real lessons elsewhere; here a grading takes seconds, not a minute), killed
with SIGKILL once the first grading is kept, then run again; and the throughput benchmark runs (its figures
are for the README, not asserted)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import tiny_course

EXPECTED_GRADEBOOK = """\
student,90_tiny/ex1_double_checks,90_tiny/ex2_half_checks,total,max,notes
ann,2,3,5,5,
bob,0,0,0,5,
cat,2,3,5,5,
dan,0,0,0,5,90_tiny: not graded: 90_tiny.ipynb is not a Jupyter notebook (NotJSONError: Notebook does not appear to be JSON: '{not json')
eve,,,0,5,no notebook in the folder; 90_tiny: not submitted
fay,0,0,0,5,
gus,2,3,5,5,notes.ipynb is not a course notebook: ignored
hal,2,0,2,5,
ivy,2,3,5,5,
jon,0,0,0,5,
"""


def class_of_ten(root: Path) -> Path:
    """Three distinct gradable files (a master, a stub, a wrong answer) among ten students, plus a file that is
    not a notebook, an empty folder, a stray notebook and a submission under another name."""
    files = {kind: nbformat.writes(nb).encode() for kind, nb in
             (("master", tiny_course.master()), ("stub", tiny_course.stub()), ("wrong", tiny_course.wrong()))}
    files["broken"] = b"{not json"
    plan = {"ann": "master", "bob": "stub", "cat": "master", "dan": "broken", "eve": None, "fay": "stub",
            "gus": "master", "hal": "wrong", "ivy": "master", "jon": "stub"}
    for student, kind in plan.items():
        folder = root / student
        folder.mkdir(parents=True)
        if kind:
            name = "my_work.ipynb" if student == "ivy" else tiny_course.NAME  # found by its lesson id
            (folder / name).write_bytes(files[kind])
    nbformat.write(nbformat.v4.new_notebook(), root / "gus" / "notes.ipynb")
    return root


def batch_command(submissions, solutions, results, csv, jobs=2) -> list[str]:
    return [sys.executable, "-m", "crashlab.cli", "grade-batch", str(submissions), "--solutions", str(solutions),
            "--results-dir", str(results), "--csv", str(csv), "--jobs", str(jobs), "--quiet"]


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def graded_files(results: Path) -> dict[str, tuple[float, str]]:
    """Every result kept that came from a grading (not a file that could not be graded): path -> (mtime, text)."""
    found = {}
    for path in sorted((results / "graded").glob("*/*.json")):
        text = path.read_text()
        if "tests" in json.loads(text):
            found[str(path.relative_to(results))] = (path.stat().st_mtime, text)
    return found


def test_a_killed_batch_resumes_and_writes_the_same_gradebook(tmp_path):
    solutions = tiny_course.write_course(tmp_path / "course")
    submissions = class_of_ten(tmp_path / "submissions")
    results, csv = tmp_path / "results", tmp_path / "gradebook.csv"
    command = batch_command(submissions, solutions, results, csv)

    first = subprocess.Popen(batch_command(submissions, solutions, results, csv, jobs=1), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not graded_files(results) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(first.pid, signal.SIGKILL)  # half way: one grading kept, the next one in flight
    first.wait()
    while processes_mentioning(str(results)) and time.monotonic() < deadline:
        time.sleep(0.1)  # the grading in flight was told to stop when the batch died
    assert not processes_mentioning(str(results)), "a grading outlived its killed batch"
    kept = graded_files(results)
    assert kept, "the first run kept nothing before it was killed"
    assert not csv.exists(), "a killed batch wrote a gradebook"
    done_before = {json.loads(text)["sha256"][:16] for _, text in kept.values()}
    done_before |= {p.stem for p in (results / ".work").glob("*.json")}  # finished, not yet filed: not lost either

    second = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{3 - len(done_before)} graded now" in second.stdout, second.stdout  # nothing graded twice
    assert "dan" in second.stdout and "not a Jupyter notebook" in second.stdout  # the summary table
    after = graded_files(results)
    assert all(after[path] == before for path, before in kept.items()), "a kept result was graded again"
    assert csv.read_text() == EXPECTED_GRADEBOOK
    assert "wrote 10 students' feedback" in second.stdout, second.stdout
    feedback = {student: (results / "graded" / student / "feedback.md").read_text() for student in "ann dan eve hal".split()}
    assert "**Total: 5 / 5**" in feedback["ann"] and "###" not in feedback["ann"], feedback["ann"]
    assert "| ex2_half_checks | 0 | 3 |" in feedback["hal"] and "### ex2_half_checks: 0 / 3" in feedback["hal"]
    assert "a hidden check" in feedback["hal"] and "**Total: 2 / 5**" in feedback["hal"], feedback["hal"]
    assert "could not be graded: 90_tiny.ipynb is not a Jupyter notebook" in feedback["dan"], feedback["dan"]
    assert "90_tiny: not submitted (0 / 5)" in feedback["eve"] and "no notebook in the folder" in feedback["eve"]
    assert not list((results / "graded").glob("*/feedback.md.*")), "written atomically, nothing left beside"



def test_the_throughput_benchmark_runs(tmp_path):
    from crashlab.grading.throughput import run_throughput

    solutions = tiny_course.write_course(tmp_path)
    result = run_throughput("90", submissions=1, jobs=2, loop=False, solutions=solutions, progress=False)
    assert result.kinds == {"master": 1, "stub": 0, "wrong": 0}
    assert list(result.runs) == ["jobs 2"]
    run = result.runs["jobs 2"]
    assert run["graded"] == 1 and run["failed"] == 0 and run["per_minute"] > 0 and run["scores"] == {"student-00": 5.0}
    assert "per minute" in str(result)
    result.runs = {"one by one": {**run, "per_minute": 2.0}, "jobs 2": {**run, "per_minute": 3.0}}
    assert "speed-up with --jobs 2: 1.50x" in str(result)


@pytest.mark.parametrize("command", ["release", "autograder", "self-check", "grade-batch", "bench-grading"])
def test_help_of_the_class_commands_exits_0(command, capsys):
    from crashlab.cli import main

    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0 and "usage:" in capsys.readouterr().out


def test_grade_batch_arguments_are_checked_before_anything_starts(tmp_path):
    for args in (["grade-batch", str(tmp_path / "nope"), "--results-dir", str(tmp_path / "r")],
                 ["grade-batch", str(tmp_path), "--results-dir", str(tmp_path / "r"), "--jobs", "0"],
                 ["bench-grading", "--lesson", "1"]):
        done = subprocess.run([sys.executable, "-m", "crashlab.cli", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "r").exists()


def test_the_benchmark_generates_masters_stubs_and_wrong_answers_all_distinct(tmp_path):
    from crashlab.grading.throughput import generate

    solutions = tiny_course.write_course(tmp_path / "course")
    made = generate(solutions / tiny_course.NAME, 4, tmp_path / "subs")
    assert made == {"student-00": "master", "student-01": "stub", "student-02": "wrong", "student-03": "master"}
    texts = {student: (tmp_path / "subs" / student / tiny_course.NAME).read_text() for student in made}
    assert len(set(texts.values())) == 4, "identical files would be graded once"
    assert "return 2 * x" in texts["student-00"] and "return 2 * x" not in texts["student-01"]
    assert "return 2 * x" not in texts["student-02"] and "return x / 2" in texts["student-02"]
