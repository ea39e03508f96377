"""The student release: no line of any master's solutions or hidden checks, no answers module, no master
output -- checked here independently of the code that builds it, by scanning every file of the release for
every line of those regions -- and a fresh `git clone` of it sets up, opens Lab, and self-checks an unanswered
notebook to 0, saying what is missing. nbgrader's own release step accepts the masters as they are."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import tiny_course
from crashlab.course.notebooks import written_files
from crashlab.grading.build import student_version
from crashlab.grading.classroom import exercises, workflow
from crashlab.release.files import TEMPLATES
from crashlab.release.student import ReleaseError, build_release

ROOT = Path(__file__).resolve().parents[2]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))
LESSON2 = "02_idempotent_tools.ipynb"
REGION = re.compile(r"^\s*# BEGIN (SOLUTION|HIDDEN TESTS)\s*$")
REGION_END = re.compile(r"^\s*# END (SOLUTION|HIDDEN TESTS)\s*$")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"  # what a master saves of its progress bars
GENERIC = 40  # a line this long that the library also has is a master's line copied, not a coincidence


def region_lines(nb) -> set[str]:
    """Every line inside a solution or hidden-test region of a notebook, stripped."""
    found, inside = set(), False
    for cell in nb.cells:
        for line in cell.source.splitlines():
            if REGION.match(line):
                inside = True
            elif REGION_END.match(line):
                inside = False
            elif inside and line.strip():
                found.add(line.strip())
        inside = False
    return found


def secret_lines() -> set[str]:
    """What the masters hold that a student must not have: their regions' lines, less those the student
    notebooks show anyway and short ones that the library outside its answers also happens to contain
    (``for row in rows:``)."""
    regions = set().union(*(region_lines(nbformat.read(m, as_version=4)) for m in MASTERS))
    shown = {line.strip() for m in MASTERS for cell in student_version(nbformat.read(m, as_version=4)).cells
             for line in cell.source.splitlines()}
    library = {line.strip() for path in (ROOT / "shared").rglob("*.py") if "answers" not in path.parts
               for line in path.read_text().splitlines()}
    return {line for line in regions - shown if line not in library or len(line) >= GENERIC}


def release_files(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts]


def leaks(out: Path) -> list[tuple[str, str]]:
    """(file, line) of every master's solution or hidden-test line found in the release ``out``."""
    secret = secret_lines()
    return [(str(p.relative_to(out)), line.strip()) for p in release_files(out) for line in text_lines(p)
            if line.strip() in secret]


def text_lines(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return [line for cell in nb.cells for line in cell.source.splitlines()] + \
               [line for cell in nb.cells for out in cell.get("outputs", []) for line in json.dumps(out).splitlines()]
    return path.read_text(errors="replace").splitlines()


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("release") / "course-release"
    return out, build_release(out)


def test_the_release_holds_no_master_line_no_answers_and_no_outputs(release):
    out, notes = release
    secret = secret_lines()
    assert len(secret) > 300
    answers = (ROOT / "shared" / "crashlab" / "answers" / "lesson01.py").read_text().splitlines()
    assert sum(line.strip() in secret for line in answers) > 10, "the scan would not even see lesson 1's answers"

    found = leaks(out)
    assert not found, found[:10]
    files = release_files(out)
    names = {str(p.relative_to(out)) for p in files}
    assert not [n for n in names if n.startswith(("solutions", "tests/", "lesson-files"))]
    assert not [n for n in names if re.search(r"\.pyc$|__pycache__|egg-info", n)]
    # The one answers module a release of lesson 1 carries runs the learner's own lesson 1 files: it is the template.
    assert [n for n in names if re.search(r"answers/lesson\d\d\.py$", n)] == ["shared/crashlab/answers/lesson01.py"]
    assert (out / "shared" / "crashlab" / "answers" / "lesson01.py").read_bytes() == \
        (TEMPLATES / "own_lesson01.py").read_bytes()
    assert {"README.md", "Makefile", "environment.yml", "pyproject.toml", "constraints.txt",
            ".github/workflows/classroom.yml", ".github/classroom/grade.sh"} <= names
    assert sorted(p.name for p in (out / "course").glob("*.ipynb")) == [m.name for m in MASTERS]
    for path in (out / "course").glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        assert not [c for c in nb.cells if c.cell_type == "code" and (c.outputs or c.execution_count)], path.name
        assert not [c for c in nb.cells if "BEGIN SOLUTION" in c.source or "BEGIN HIDDEN TESTS" in c.source]
    assert "solutions" not in (out / "environment.yml").read_text() + (out / "Makefile").read_text()
    assert not [p for p in files if WIDGET_STATE in p.read_text(errors="replace")], "the masters' saved widget state"
    assert not [line for line in (out / ".gitignore").read_text().splitlines() if "test" in line], \
        "the release's .gitignore names a test it does not ship"
    assert not any("lesson 02 builds on" in note for note in notes), notes
    assert any("lesson 01's answers are not in the release: the lessons after it run the learner's own lesson 01 "
               "files" in note for note in notes), notes
    assert any("lesson 07 builds on the answers of lesson 02, not released: release lesson 07 on its own "
               "(--lessons 07 --answers-through 02)" in note for note in notes), notes
    log = subprocess.run(["git", "log", "--oneline"], cwd=out, capture_output=True, text=True, check=True).stdout
    assert len(log.splitlines()) == 1, "one commit, none of this repository's history"


def test_the_release_workflow_grades_with_the_private_bundle(release):
    out, _ = release
    text = (out / ".github" / "workflows" / "classroom.yml").read_text()
    assert text == workflow(ROOT / "solutions", bundle=True)
    for secret in ("CRASHLAB_BUNDLE_URL", "CRASHLAB_BUNDLE_KEY", "CRASHLAB_GRADER_REPO", "CRASHLAB_GRADER_TOKEN"):
        assert f"${{{{ secrets.{secret} }}}}" in text
    assert "grade.sh fetch .grader" in text and "make setup" not in text
    assert text.count("command: .grader/.venv/bin/crashlab result results-") == text.count("autograding-command-grader")
    script = out / ".github" / "classroom" / "grade.sh"
    assert script.read_text() == (TEMPLATES / "grade.sh").read_text() and os.access(script, os.X_OK)
    assert ".grader/" in (out / ".gitignore").read_text().splitlines()


def test_answers_through_releases_the_earlier_lessons_answers_with_later_lessons_only(tmp_path):
    out = tmp_path / "release"
    notes = build_release(out, answers_through="02", lessons=["07", "08", "11"], git=False)
    assert (out / "shared" / "crashlab" / "answers" / "lesson01.py").read_bytes() == \
        (ROOT / "shared" / "crashlab" / "answers" / "lesson01.py").read_bytes()
    assert {p.parent.name for p in (out / "lesson-files").glob("*/*.py")} == {"01", "02"}  # lessons 7 and 11 run them
    assert not notes, notes
    assert "answers to lessons up to 02 are released" in (out / "README.md").read_text()
    for lessons, through in ((None, "01"), (["01", "02", "03"], "01"), (["02"], "02"), (["03"], "05")):
        with pytest.raises(ReleaseError, match=r"would hand out the answers of lesson \d\d, which this release gives"):
            build_release(tmp_path / f"refused-{through}-{lessons}", answers_through=through, lessons=lessons, git=False)
        assert not (tmp_path / f"refused-{through}-{lessons}").exists(), "refused before anything was written"


def test_a_release_of_lessons_01_to_03_runs_lesson_2s_demonstrations_on_the_learners_own_lesson_1(tmp_path,
                                                                                                  monkeypatch):
    """Lesson 2's given agents build on lesson 1's loop: in a release that hands lesson 1 out to be answered they run
    the learner's own lesson 1 files, and the release holds no line of lesson 1's answers. Lesson 2's demonstrations,
    run as the notebook runs them (its given cells, with the release's library), show the duplicates they are there
    to show, on a learner's finished lesson 1; on an unfinished one they say which file to finish."""
    from nbclient import NotebookClient

    out = tmp_path / "release"
    notes = build_release(out, lessons=["01", "02", "03"], git=False)
    assert not leaks(out)
    assert not [n for n in notes if "builds on" in n], notes
    assert "their given agents run your own lesson 01 files" in (out / "README.md").read_text()
    course = out / "course"
    lesson1 = course / "01_naive_event_log"
    lesson1.mkdir()
    nb = nbformat.read(course / LESSON2, as_version=4)
    last = next(k for k, c in enumerate(nb.cells) if c.source.startswith("print(with_uuid)"))
    nb.cells = nb.cells[:last + 1]  # the given cells up to the demonstrations' results, before exercise 1
    demo = next(c for c in nb.cells if c.source.lstrip().startswith("tool_points = ["))
    demo.source = re.sub(r"tool_points = \[.*?\]\n", 'tool_points = ["after:charge_card"]  # one point: quicker\n',
                         demo.source, count=1, flags=re.S)
    assert 'tool_points = ["after:charge_card"]' in demo.source, demo.source
    monkeypatch.setenv("PYTHONPATH", str(out / "shared"))  # the kernel and its agents import the release's library
    monkeypatch.delenv("CRASHLAB_ROOT", raising=False)

    def run(notebook):
        NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(course)}},
                       allow_errors=True).execute()
        return "\n".join(o.get("text", "") + "".join(o.get("traceback", [])) for c in notebook.cells
                         if c.cell_type == "code" for o in c.outputs)

    unfinished = run(copy.deepcopy(nb))
    assert "your lesson 1 loop, and course/01_naive_event_log/order_log.py is not written yet" in unfinished, unfinished
    for name, source in written_files(nbformat.read(ROOT / "solutions" / "01_naive_event_log.ipynb",
                                                    as_version=4)).items():
        (lesson1 / name).write_text(source)  # a learner who finished lesson 1
    finished = run(nb)
    assert "crashlab/answers/lesson01.py" not in finished and "Error" not in finished, finished
    assert re.search(r"after:charge_card +yes +1 ", finished) and "uuid_agent.py on ORD-8842" in finished, finished


def test_a_fresh_clone_sets_up_opens_lab_and_self_checks_an_unanswered_notebook(release, tmp_path):
    out, _ = release
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(out), str(clone)], check=True)
    # The clone runs its own library: a PYTHONPATH of the caller's (a worktree's shared/) would put that one first,
    # with every lesson's answers in it, and the self-check would not miss lesson 01's.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CRASHLAB_RESTATE_BIN")}
    make = lambda *args: subprocess.run(["make", *args], cwd=clone, capture_output=True, text=True, timeout=600,  # noqa: E731
                                        env=env)
    setup = make("setup", f"PYTHON={shutil.which('python3.11') or sys.executable}")
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert (clone / ".venv" / ".installed").is_file()
    # The Restate lesson's server, where the library looks for it (with npm, or downloaded without it).
    found = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c", "from crashlab.engines.restate import "
                            "restate_binary; print(restate_binary())"], capture_output=True, text=True, env=env)
    assert found.returncode == 0 and found.stdout.startswith(str(clone / ".venv" / "restate")), \
        setup.stdout + setup.stderr + found.stdout + found.stderr

    lab = make("-n", "lab")
    assert lab.returncode == 0 and "jupyter lab --notebook-dir=course" in lab.stdout, lab.stdout + lab.stderr
    assert os.access(clone / ".venv" / "bin" / "jupyter-lab", os.X_OK)

    usage = make("check")
    assert usage.returncode != 0 and "usage: make check NB=" in usage.stderr
    # Lesson 2: its Run All is the shortest, and it builds on lesson 1's answers, which this release leaves out.
    check = make("check", f"NB=course/{LESSON2}")
    # less than full marks is the table's news, not a failure of make's ("make: *** [check] Error 1")
    assert check.returncode == 0 and "Error 1" not in check.stderr, check.stdout + check.stderr
    points = sum(points for _, points in exercises(ROOT / "solutions" / LESSON2))
    assert f"self-check 0 / {points}" in check.stdout, check.stdout + check.stderr
    assert re.search(r"exercise 1 is not answered yet: keys.py line \d+ still has the placeholder", check.stdout)
    for matrix in ("ex1_crash_matrix", "ex2_racing_resumers", "ex2_double_crash_and_lost_ack"):
        assert re.search(rf"{matrix} +0 +\d+ +not run: keyed_agent.py is not ready", check.stdout), check.stdout
    assert ("this lesson's agents run your own lesson 01 files, and course/01_naive_event_log/order_log.py is not "
            "written yet") in check.stdout, check.stdout
    assert "Traceback" not in check.stdout + check.stderr
    assert "isolated: no (a self-check runs your code as you)" in check.stdout, "not a grading, as root or not"
    assert subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout == "", \
        "setting up or checking left files git would commit"


def test_the_self_check_passes_a_right_answer_and_trusts_no_saved_output(tmp_path):
    """Exercise 1 answered; exercise 2 left as given, its check cell saved as if it had passed."""
    nb = tiny_course.master()
    nb.cells[3] = tiny_course.stub().cells[3]
    nb.cells[4].execution_count, nb.cells[4].outputs = 7, []
    nbformat.write(nb, tmp_path / tiny_course.NAME)
    done = subprocess.run([sys.executable, "-m", "crashlab.cli", "self-check", str(tmp_path / tiny_course.NAME)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "self-check 2 / 5" in done.stdout, done.stdout
    assert re.search(r"ex1_double_checks +2 +2 +visible checks passed", done.stdout), done.stdout
    assert re.search(r"exercise 2 is not answered yet: halves.py line \d+ still has the placeholder", done.stdout)


def test_nbgrader_generate_assignment_accepts_the_masters_as_they_are(tmp_path):
    """An nbgrader instructor drops solutions/ into a course's source/: nbgrader's own release step makes the same
    student notebooks as `crashlab build` (less the nbval comments our build turns into tags)."""
    course = tmp_path / "nbgrader-course"
    (course / "source" / "crashlab").mkdir(parents=True)
    for master in MASTERS:
        shutil.copyfile(master, course / "source" / "crashlab" / master.name)
    (course / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "crashlab"\n')
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # nbgrader runs alembic
    done = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "generate_assignment", "crashlab", "--force"],
                          cwd=course, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    marker = re.compile(r"^\s*# NBVAL_\w+\s*$")
    for master in MASTERS:
        theirs = nbformat.read(course / "release" / "crashlab" / master.name, as_version=4)
        ours = student_version(nbformat.read(master, as_version=4))
        assert len(theirs.cells) == len(ours.cells), master.name
        for a, b in zip(theirs.cells, ours.cells):
            assert "\n".join(line for line in a.source.split("\n") if not marker.match(line)) == b.source, master.name
        assert not [c for c in theirs.cells if c.cell_type == "code" and c.outputs]


def test_the_restate_server_pin_is_one_version_everywhere_setup_installs_it():
    """The course's Makefile, the learner's and the grading bundle's setup.sh, and Binder's postBuild install the
    server the library expects: each reads the one pin the library reads (the engine's SERVER_VERSION file), and
    each installs it on a machine without npm (the bundle's setup.sh never uses npm: Gradescope has none)."""
    from crashlab.engines.restate import RESTATE_VERSION

    pin = ROOT / "shared" / "crashlab" / "engines" / "restate" / "SERVER_VERSION"
    assert pin.read_text().strip() == RESTATE_VERSION and re.fullmatch(r"\d+\.\d+\.\d+", RESTATE_VERSION)
    for path in (ROOT / "Makefile", TEMPLATES / "Makefile", TEMPLATES / "setup.sh", ROOT / "postBuild"):
        text = path.read_text()
        pins = re.findall(r"^RESTATE_VERSION *:?= *(.+)$", text, re.M)
        assert pins and all("shared/crashlab/engines/restate/SERVER_VERSION" in p for p in pins), f"{path}: {pins}"
        assert "-m crashlab.engines.restate.fetch" in text, path
        assert ("@restatedev/restate-server@$" in text) == (path.name != "setup.sh"), path
    for path in (ROOT / "Makefile", TEMPLATES / "Makefile"):
        assert re.search(r"^setup: .*\$\(RESTATE_STAMP\)", path.read_text(), re.M), path
    for folder, makefile in ((ROOT, ROOT / "Makefile"), (ROOT, TEMPLATES / "Makefile")):  # what make reads
        done = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(folder), "-f", str(makefile),
                               "--eval=show-pin: ; @echo '[$(RESTATE_VERSION)]'", "show-pin"],
                              capture_output=True, text=True, timeout=60)
        assert done.stdout.strip() == f"[{RESTATE_VERSION}]", (makefile, done.stdout, done.stderr)


def test_a_release_of_one_lesson_holds_and_grades_that_lesson_only(tmp_path):
    """A class that releases a lesson a week makes one release (one Classroom assignment) per lesson: its
    workflow grades that lesson alone, out of that lesson's points, and skips Classroom's own first commit."""
    from crashlab.grading.classroom import CLASSROOM_BOT, exercises

    out = tmp_path / "release"
    build_release(out, lessons=["02"], git=False)
    assert [p.name for p in (out / "course").glob("*.ipynb")] == ["02_idempotent_tools.ipynb"]
    text = (out / ".github" / "workflows" / "classroom.yml").read_text()
    expected = exercises(ROOT / "solutions" / "02_idempotent_tools.ipynb")
    assert text.count("autograding-command-grader") == len(expected)
    assert sum(int(line.split(":")[1]) for line in text.splitlines() if "max-score:" in line) == \
        sum(points for _, points in expected)
    assert "01_naive_event_log" not in text and "grade .grader 02_idempotent_tools\n" in text
    assert f"if: github.actor != '{CLASSROOM_BOT}'" in text


def test_lesson_ranges_are_read_as_an_instructor_writes_them():
    from crashlab.grading.classroom import parse_lessons

    available = ["01", "02", "03", "04", "05"]
    assert parse_lessons("02-04", available) == ["02", "03", "04"]
    assert parse_lessons("05,01", available) == ["01", "05"]
    for wrong in ("2", "09", "01-x", ""):
        with pytest.raises(ValueError):
            parse_lessons(wrong, available)
