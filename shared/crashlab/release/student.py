"""The student release (``crashlab release OUT_DIR``): the course as a graded class gets it.

This repository is the self-paced edition: ``solutions/`` is in it on purpose. A graded class must not have
the key, so the release is a new git repository holding only what a learner needs, made from the masters
with the course's own build (:func:`crashlab.grading.build.build_course`):

- ``course/`` -- the student notebooks, regenerated from the masters (answers, hidden checks and outputs
  removed by nbgrader's preprocessors);
- ``shared/`` -- the library, without the lesson answers (``crashlab/answers/lessonNN.py``) unless the
  instructor releases those of lessons up to NN with ``--answers-through NN``: only in a release of later
  lessons (a lesson's answers never go out with the lesson), so after NN's deadline. Where the release hands out
  a lesson to be answered whose answers later lessons build on (lesson 2's given agents run lesson 1's loop),
  that module is instead ``templates/own_lessonNN.py``, which runs the learner's own files of lesson NN;
- ``lesson-files/NN/`` -- for a lesson that runs earlier lessons' reference agents (lesson 11 runs 1 and 2's),
  those agents, when their answers are released; the Makefile points the library at them;
- a learner's ``README.md``, a ``Makefile`` (``make setup``, ``make lab``, ``make check NB=...`` -- the
  self-check of :mod:`crashlab.grading.selfcheck`), ``environment.yml``, ``pyproject.toml`` and
  ``constraints.txt``;
- ``.github/workflows/classroom.yml`` and ``.github/classroom/grade.sh``: GitHub Classroom grading with the
  private bundle of :mod:`crashlab.release.bundle`, fetched with the repository's secrets at grading time.

No ``solutions/``, no tests (they read the masters), no compiled files, no git history of this repository.
"""

from __future__ import annotations

import os
import shutil
import string
import subprocess
from pathlib import Path

import nbformat

from crashlab.errors import CrashlabError
from crashlab.grading.build import build_course
from crashlab.grading.classroom import BUNDLE_DIR, workflow
from crashlab.course.notebooks import lesson_of, repo_root, written_files
from crashlab.grading.selfcheck import ANSWERS_IMPORT
from crashlab.release.files import TEMPLATES, library_files
from crashlab.course.metadata import lesson_meta


class ReleaseError(CrashlabError, RuntimeError):
    """The release cannot be made where asked. The message says why."""


def _write(path: Path, text: str | bytes, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    if executable:
        os.chmod(path, 0o755)


def lessons_needing(course: Path, own: list[str] | None = None) -> dict[str, set[str]]:
    """lesson -> the earlier lessons whose answers it uses: imported by its given cells (``crashlab.answers``),
    unless the release runs the learner's own files of that lesson instead (``own``), or its agents run (their
    master's files, ``uses_lessons``)."""
    needs: dict[str, set[str]] = {}
    for path in sorted(course.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        imported = set(ANSWERS_IMPORT.findall("\n".join(c.source for c in nb.cells)))
        needs[str(lesson_of(nb))] = (imported - set(own or [])) | set(lesson_meta(nb).get("uses_lessons", []))
    return needs


def own_answers(lesson: str) -> Path | None:
    """The module that stands in for lesson ``lesson``'s answers by running the learner's own files of that lesson,
    if there is one."""
    path = TEMPLATES / f"own_lesson{lesson}.py"
    return path if path.is_file() else None


def check_answers_through(answers_through: str | None, released: list[str]) -> None:
    """A lesson's answers go out only after it: never in the release that hands the lesson out to be answered."""
    if answers_through is None:
        return
    answered = [lesson for lesson in released if lesson <= answers_through]
    if answered:
        raise ReleaseError(
            f"--answers-through {answers_through} would hand out the answers of lesson {', '.join(answered)}, which "
            f"this release gives to be answered (lessons {', '.join(released)}). Release a lesson's answers only "
            f"with later lessons, once its deadline has passed (--lessons {int(max(answered)) + 1:02d} "
            f"--answers-through {max(answered)}, say)")


def learner_readme(course: Path, answers_through: str | None, missing: dict[str, set[str]],
                   own: list[str] | None = None) -> str:
    rows = []
    for path in sorted(course.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        rows.append(f"| `course/{path.name}` | {nb.metadata.get('crashlab', {}).get('title', '')} |")
    answers = ""
    if answers_through:
        answers = (f"\nThe answers to lessons up to {answers_through} are released: the library's `crashlab.answers` "
                   "holds them, for the later lessons that build on them.\n")
    stems = {lesson_of(nbformat.read(path, as_version=4)): path.stem for path in sorted(course.glob("*.ipynb"))}
    for lesson in own or []:
        answers += (f"\nLater lessons build on lesson {lesson}: their given agents run your own lesson {lesson} files\n"
                    f"(`course/{stems.get(lesson, lesson)}/`, written by its notebook), so finish lesson {lesson} "
                    "first.\n")
    if missing:
        answers += ("\nSome lessons build on earlier lessons' answers that are not released yet ("
                    + "; ".join(f"lesson {lesson} on lesson {', '.join(sorted(needs))}" for lesson, needs in
                                sorted(missing.items()))
                    + "): your instructor releases them once those lessons are graded.\n")
    return string.Template((TEMPLATES / "README.md").read_text()).substitute(lessons="\n".join(rows), answers=answers)


def gitignore(root: Path) -> str:
    """This repository's ignore list without what concerns the masters, plus the fetched grading bundle."""
    kept = [line for line in (root / ".gitignore").read_text().splitlines()
            if not any(word in line for word in ("solutions", "tests/", "test-artifacts"))]  # none of them ship
    return "\n".join(kept + ["# the grading bundle the classroom workflow fetches", f"{BUNDLE_DIR}/"]) + "\n"


def _commit(out: Path) -> str | None:
    """Make ``out`` a git repository with one commit; a note when git cannot."""
    if shutil.which("git") is None:
        return "git is not installed: the release is a plain folder; `git init` it before pushing it"
    identity = subprocess.run(["git", "config", "user.email"], cwd=out, capture_output=True, text=True).stdout.strip()
    who = [] if identity else ["-c", "user.name=crashlab release", "-c", "user.email=crashlab@localhost"]
    for command in (["init", "--quiet", "--initial-branch=main"], ["add", "--all"],
                    [*who, "commit", "--quiet", "-m", "The course, as released to students"]):
        subprocess.run(["git", *command], cwd=out, check=True, capture_output=True)
    return None


def build_release(out: Path, answers_through: str | None = None, root: Path | None = None,
                  git: bool = True, lessons: list[str] | None = None) -> list[str]:
    """Write the student release to ``out`` (new or empty); returns notes for the instructor. ``lessons``: only
    these lessons' notebooks, and a workflow that grades only them (a class that releases a lesson a week makes
    one release, and one Classroom assignment, per lesson)."""
    root = root or repo_root()
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(f"{out} exists and is not an empty folder: give a new one")
    solutions = root / "solutions"
    if not any(solutions.glob("*.ipynb")):
        raise ReleaseError(f"no master notebooks in {solutions}: run this in the course repository")
    every = sorted(lesson for m in solutions.glob("*.ipynb") if (lesson := lesson_of(nbformat.read(m, as_version=4))))
    check_answers_through(answers_through, every if lessons is None else sorted(lessons))
    out.mkdir(parents=True, exist_ok=True)
    build_course(solutions, out / "course")
    if lessons is not None:  # a folder of our own, just made: only the lessons released stay in it
        for path in sorted((out / "course").glob("*.ipynb")):
            if lesson_of(nbformat.read(path, as_version=4)) not in lessons:
                path.unlink()
    for path in library_files(root, answers_through):
        _write(out / path.relative_to(root), path.read_bytes())
    # A lesson answered in this release that a later one in it builds on: the later one runs the learner's own files.
    built_on = set().union(*lessons_needing(out / "course").values())
    own = {lesson: mine for lesson in (every if lessons is None else sorted(lessons))
           if lesson in built_on and (mine := own_answers(lesson)) is not None}
    for lesson, path in own.items():
        _write(out / "shared" / "crashlab" / "answers" / f"lesson{lesson}.py", path.read_bytes())
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copyfile(root / name, out / name)
    _write(out / "environment.yml", (root / "environment.yml").read_text().replace(".[test,lab]", ".[lab]"))
    _write(out / "Makefile", (TEMPLATES / "Makefile").read_text())
    _write(out / ".gitignore", gitignore(root))
    _write(out / ".github" / "workflows" / "classroom.yml", workflow(solutions, bundle=True, lessons=lessons))
    _write(out / ".github" / "classroom" / "grade.sh", (TEMPLATES / "grade.sh").read_text(), executable=True)

    released = lambda lesson: answers_through is not None and lesson <= answers_through  # noqa: E731
    needs = lessons_needing(out / "course", list(own))
    for master in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(master, as_version=4)
        lesson = lesson_of(nb)
        if lesson is not None and released(lesson) and any(lesson in wanted for wanted in needs.values()):
            for name, text in written_files(nb).items():
                _write(out / "lesson-files" / lesson / name, text)
    missing = {lesson: {w for w in wanted if not released(w)} for lesson, wanted in needs.items()}
    missing = {lesson: wanted for lesson, wanted in missing.items() if wanted}
    _write(out / "README.md", learner_readme(out / "course", answers_through, missing, list(own)))
    notes = [f"lesson {lesson} builds on the answers of lesson {', '.join(sorted(wanted))}, not released: release "
             f"lesson {lesson} on its own (--lessons {lesson} --answers-through {max(wanted)}) once "
             f"lesson {max(wanted)} is graded"
             for lesson, wanted in sorted(missing.items())]
    notes += [f"lesson {lesson}'s answers are not in the release: the lessons after it run the learner's own lesson "
              f"{lesson} files" for lesson in own]
    if git:
        notes += [note for note in [_commit(out)] if note]
    return notes
