"""Nothing a command writes replaces what it did not create.

- ``crashlab build`` writes the student notebooks a learner has not touched and leaves the rest alone, naming
  each; it deletes nothing (a "-Copy1", the learner's notes).
- A fresh world deletes only its own files, by name, and takes a folder only by its marker.
- Every output (``--json``, ``--csv``, ``--plot``, the grading bundle) refuses to replace a master, a notebook
  or any file it did not write -- one ``error:`` line, a non-zero exit, the file as it was -- and still
  replaces its own earlier output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import nbformat
import pytest

from crashlab.grading.batch import Batch, write_gradebook
from crashlab.grading.build import build_course, is_untouched, out_of_date
from crashlab.grading.report import GradeReport, write_results
from crashlab.grading.throughput import Throughput
from crashlab.harness import Matrix
from crashlab.order import AMOUNT, ORDER_ID
from crashlab.plumbing.outputs import DEMO, OutputError, check_replaceable, write_output
from crashlab.release.bundle import build_autograder, encrypt
from crashlab.soak.results import SoakResult
from crashlab.world import World, WorldError

ROOT = Path(__file__).resolve().parents[1]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))
LESSON1, LESSON2 = MASTERS[0], MASTERS[1]
AGENT = ROOT / "tests" / "agents" / "logged_agent.py"
MARKER = ".crashlab-world"


def crashlab(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crashlab.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


# --- 1. build ------------------------------------------------------------------------------------------------

@pytest.fixture
def course(tmp_path):
    """A course of two lessons, built once, as a learner finds it."""
    solutions, course = tmp_path / "solutions", tmp_path / "course"
    solutions.mkdir()
    for master in (LESSON1, LESSON2):
        shutil.copyfile(master, solutions / master.name)
    assert build_course(solutions, course).wrote == [course / LESSON1.name, course / LESSON2.name]
    return solutions, course


def change_master(master: Path) -> None:
    """An author's edit: a new paragraph at the end of the lesson."""
    nb = nbformat.read(master, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("One more thing."))
    nbformat.write(nb, master)


def answer(notebook: Path) -> None:
    """What a learner does in Jupyter: edit a cell and save (nbformat writes as Jupyter does)."""
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("My notes: the charge happened before the crash."))
    nbformat.write(nb, notebook)


def test_an_answered_notebook_a_copy_and_notes_survive_a_build_that_updates_the_rest(course):
    solutions, course = course
    first, second = course / LESSON1.name, course / LESSON2.name
    answer(first)
    answered = first.read_text()
    copy = course / f"{LESSON1.stem}-Copy1.ipynb"
    shutil.copyfile(second, copy)  # Jupyter's Duplicate of an untouched notebook: the build's stamp and all
    notes = course / "my-notes.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notes)
    for master in solutions.iterdir():
        change_master(master)
    done = build_course(solutions, course)
    assert done.wrote == [second] and "One more thing." in second.read_text()
    assert first.read_text() == answered and copy.exists() and notes.exists()
    left = dict(done.left_alone)
    assert "--force" in left[first] and "\n" not in left[first]
    assert "solutions/ has no" in left[copy] and notes not in left  # a notebook the build never wrote: not its business
    assert out_of_date(solutions, course) == [first]


def test_force_replaces_an_answered_notebook_and_still_deletes_nothing(course):
    solutions, course = course
    first = course / LESSON1.name
    answer(first)
    notes = course / "notes.ipynb"
    notes.write_text("{}")
    change_master(solutions / LESSON1.name)
    assert build_course(solutions, course).wrote == []
    assert build_course(solutions, course, force=True).wrote == [first]
    assert "One more thing." in first.read_text() and "My notes" not in first.read_text()
    assert notes.read_text() == "{}" and out_of_date(solutions, course) == []


def test_an_untouched_notebook_stays_untouched_when_jupyter_saves_it_again(course):
    """The fingerprint is of the content, not of the bytes: a re-save that changes nothing is not an edit."""
    _, course = course
    target = course / LESSON1.name
    nbformat.write(nbformat.read(target, as_version=4), target)
    assert is_untouched(target)
    answer(target)
    assert not is_untouched(target)


def test_a_symlinked_course_notebook_is_never_written_through(course):
    solutions, course = course
    victim = course.parent / "elsewhere.ipynb"
    shutil.copyfile(course / LESSON1.name, victim)
    before = victim.read_text()
    (course / LESSON1.name).unlink()
    (course / LESSON1.name).symlink_to(victim)
    change_master(solutions / LESSON1.name)
    done = build_course(solutions, course)
    assert [path for path, _ in done.left_alone] == [course / LESSON1.name] and victim.read_text() == before


# --- 2. the world --------------------------------------------------------------------------------------------

def test_a_fresh_world_deletes_only_its_own_files(tmp_path):
    state = tmp_path / "lesson"
    with World.start(state) as world:
        httpx.post(world.url + "/payments/charges", json={"order_id": ORDER_ID, "amount": AMOUNT}).raise_for_status()
        (world.agent_dir / "events.jsonl").write_text("{}\n")
    planted = {state / "my_agent.py": "print('mine')", state / "lesson" / "answer.py": "ANSWER = 42",
               state / "ledgers" / "thesis.txt": "chapter 1"}
    for path, text in planted.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    with World.start(state) as world:
        assert world.audit().counts["charge"] == 0  # its ledgers were deleted, by name
        assert not (world.agent_dir / "events.jsonl").exists()
    assert {path: path.read_text() for path in planted} == planted


def test_a_folder_that_looks_like_a_worlds_but_has_no_marker_is_refused(tmp_path):
    state = tmp_path / "old"
    (state / "ledgers").mkdir(parents=True)
    (state / "world.log").write_text("")
    (state / "ledgers" / "thesis.txt").write_text("chapter 1")
    with pytest.raises(WorldError) as excinfo:
        World.start(state)
    assert "\n" not in str(excinfo.value) and MARKER in str(excinfo.value)
    assert (state / "ledgers" / "thesis.txt").read_text() == "chapter 1" and not (state / MARKER).exists()
    done = crashlab("world", "start", "--state", ".", cwd=state)
    assert "new or empty folder" in one_error_line(done)
    assert (state / "ledgers" / "thesis.txt").read_text() == "chapter 1"


def test_world_start_in_a_folder_used_before_keeps_what_was_put_there_since(tmp_path):
    """`crashlab world start --state .`, stopped, a file of the learner's added, started again."""
    for _ in range(2):
        started = crashlab("world", "start", "--state", ".", "--detach", cwd=tmp_path)
        try:
            assert started.returncode == 0, started.stderr
            (tmp_path / "my_agent.py").write_text("print('mine')")
        finally:
            assert crashlab("world", "stop", "--state", ".", cwd=tmp_path).returncode == 0
    assert (tmp_path / "my_agent.py").read_text() == "print('mine')"


# --- 3. outputs ----------------------------------------------------------------------------------------------

@pytest.fixture
def foreign(tmp_path):
    """Files no command wrote: a copy of a master, a text file, a zip of the user's."""
    (tmp_path / "master.ipynb").write_bytes(LESSON2.read_bytes())
    (tmp_path / "notes.txt").write_text("my notes\n")
    shutil.make_archive(str(tmp_path / "mine"), "zip", root_dir=ROOT / "tests" / "agents")
    return tmp_path


def unchanged(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


REFUSED = [
    ("grade-json", ["grade", "subs/alice/" + LESSON2.name, "--json", "{target}"]),
    ("crash-test-json", ["crash-test", str(AGENT), "--json", "{target}"]),
    ("soak-json", ["soak", str(AGENT), "--json", "{target}"]),
    ("demo-json", ["demo", "--json", "{target}"]),
    ("bench-json", ["bench", "--json", "{target}"]),
    ("bench-grading-json", ["bench-grading", "--json", "{target}"]),
    ("grade-batch-csv", ["grade-batch", "subs", "--results-dir", "results", "--csv", "{target}"]),
    ("autograder-zip", ["autograder", "{target}"]),
]


@pytest.mark.parametrize("target", ["master.ipynb", "notes.txt", "mine.zip"])
@pytest.mark.parametrize("case, args", REFUSED, ids=[case for case, _ in REFUSED])
def test_an_output_never_replaces_a_file_it_did_not_write(foreign, case, args, target):
    if case == "autograder-zip" and not target.endswith(".zip"):  # the bundle's name must end in .zip
        shutil.copyfile(foreign / target, foreign / f"{target}.zip")
        target = f"{target}.zip"
    (foreign / "subs" / "alice").mkdir(parents=True)
    shutil.copyfile(foreign / "master.ipynb", foreign / "subs" / "alice" / LESSON2.name)
    before = unchanged(foreign)
    done = crashlab(*[a.replace("{target}", target) for a in args], cwd=foreign)
    assert "--force" in one_error_line(done) and target in done.stderr
    assert unchanged(foreign) == before and not (foreign / "results").exists()


def test_grade_batch_csv_never_replaces_a_submitted_notebook(tmp_path):
    submitted = tmp_path / "subs" / "alice" / LESSON1.name
    submitted.parent.mkdir(parents=True)
    shutil.copyfile(ROOT / "course" / LESSON1.name, submitted)
    before = submitted.read_bytes()
    done = crashlab("grade-batch", "subs", "--results-dir", "results", "--csv", str(submitted), cwd=tmp_path)
    assert "a notebook" in one_error_line(done)
    assert submitted.read_bytes() == before


def test_the_encrypted_bundle_never_replaces_a_file_it_did_not_write(foreign):
    (foreign / "grader.zip.enc").write_text("my notes\n")
    done = crashlab("autograder", "grader.zip", "--encrypt", "grader.key", cwd=foreign)
    one_error_line(done)
    assert (foreign / "grader.zip.enc").read_text() == "my notes\n" and not (foreign / "grader.zip").exists()


def earlier_outputs(folder: Path) -> dict[str, callable]:
    """Each kind of output written twice by its own writer: the second must replace the first."""
    matrix = Matrix(str(AGENT), ORDER_ID, "durable", [], 1.0)
    return {
        "results.json": lambda path, force: write_results(GradeReport("nb.ipynb", "01"), path, force=force),
        "matrix.json": lambda path, force: matrix.write_json(path, force=force),
        "soak.json": lambda path, force: SoakResult(str(AGENT), {}, [], 0, [], 1.0).write_json(path, force=force),
        "demo.json": lambda path, force: write_output(path, json.dumps([{"lesson": "01", "title": "t",
                                                                         **matrix.as_dict()}]), DEMO, force=force),
        "throughput.json": lambda path, force: Throughput("01", 1, 1, {}).write_json(path, force=force),
        "gradebook.csv": lambda path, force: write_gradebook(Batch(), path, force=force),
    }


@pytest.mark.parametrize("name", list(earlier_outputs(Path())))
def test_each_output_replaces_its_own_earlier_output_and_only_that(tmp_path, name):
    write = earlier_outputs(tmp_path)[name]
    path = tmp_path / name
    write(path, False)
    path.write_text(path.read_text().replace("1.0", "2.0"))  # an earlier run's, with other figures
    write(path, False)
    assert path.read_text() != ""
    path.write_bytes(LESSON1.read_bytes())
    with pytest.raises(OutputError) as excinfo:
        write(path, False)
    assert "is a notebook" in str(excinfo.value) and path.read_bytes() == LESSON1.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".crashlab-")]  # no temporary file left
    write(path, True)  # --force
    assert path.read_bytes() != LESSON1.read_bytes()


def test_check_replaceable_allows_a_new_file_and_refuses_a_folder(tmp_path):
    check_replaceable(tmp_path / "new.json", DEMO)
    with pytest.raises(OutputError, match="is a folder"):
        check_replaceable(tmp_path, DEMO, force=True)


def test_the_bundle_and_its_encryption_replace_their_own_earlier_files(tmp_path):
    out, key = tmp_path / "grader.zip", tmp_path / "grader.key"
    for _ in range(2):
        build_autograder(out, ["01"])
        assert encrypt(out, key) == tmp_path / "grader.zip.enc"
    out.write_text("not a bundle")
    with pytest.raises(OutputError):
        build_autograder(out, ["01"])
    assert out.read_text() == "not a bundle"


def test_crash_test_json_replaces_its_matrix_refuses_a_master_and_force_overrides(tmp_path):
    out = tmp_path / "matrix.json"
    args = ["crash-test", str(AGENT), "--points", "after:charge_card", "--expect", "observe", "--quiet", "--json",
            str(out)]
    for _ in range(2):
        done = crashlab(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(out.read_text())["rows"]
    shutil.copyfile(LESSON2, out)
    one_error_line(crashlab(*args, cwd=tmp_path))
    assert out.read_bytes() == LESSON2.read_bytes()
    assert crashlab(*args, "--force", cwd=tmp_path).returncode == 0 and json.loads(out.read_text())["rows"]
