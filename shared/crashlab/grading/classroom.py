"""GitHub Classroom: a workflow with one autograding step per exercise, generated from the masters.

Each lesson is graded once (``crashlab grade ... --json``) in a setup step; then every exercise is a
``autograding-command-grader`` step whose command only reads that lesson's results
(``crashlab result FILE --test NAME --run-id ID``), so a notebook runs once however many exercises it has.
Results files are deleted before grading, and each carries the run's id (``CRASHLAB_RUN_ID``, set on the
grading step): a committed, stale, missing or unparsable results file scores 0. The command-grader runs its
command with only ``PATH``, ``HOME`` and three variables of its own (its ``src/main.js``), so the run's id
reaches ``crashlab result`` in the command's own words, never through the step's environment.

The grading reporter (``autograding-grading-reporter@v1``, its ``src/main.js``) reads each runner's result
from ``process.env[runner.trim().toUpperCase() + "_RESULTS"]`` and, when anything fails, accepts only a
``runners`` list of letters and digits (``/^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$/``) before saying what failed. So
each step's id is letters and digits only (:func:`step_id`), and its result is passed to the reporter under
that id upper-cased, plus ``_RESULTS``.

Two ways to get the masters: this repository's own ``solutions/`` (a self-paced copy, where they are there
on purpose), or -- in a graded class's student release (:mod:`crashlab.release.student`), which has none --
the private grading bundle, fetched at grading time by ``.github/classroom/grade.sh`` with the repository's
secrets and used for both the grading and the result steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from crashlab.course.notebooks import is_test_cell, lesson_of, nbgrader_meta, repo_root
from crashlab.course.metadata import lesson_meta


def exercises(master: Path) -> list[tuple[str, int]]:
    nb = nbformat.read(master, as_version=4)
    found = [(nbgrader_meta(c)["grade_id"], int(nbgrader_meta(c)["points"])) for c in nb.cells if is_test_cell(c)]
    found += [(check["name"], int(check["points"])) for check in lesson_meta(nb).get("matrix_checks", [])]
    return found


def parse_lessons(spec: str, available: list[str]) -> list[str]:
    """``01-03``, ``02`` or ``01,03,05`` -> the lesson ids, in order; a ValueError that says what is wrong."""
    wanted: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        first, dash, last = part.partition("-")
        if not (first.isdigit() and len(first) == 2 and (not dash or (last.isdigit() and len(last) == 2))):
            raise ValueError(f"{part!r} is not a lesson (NN) or a range (NN-MM), e.g. 01-03 or 02,04")
        wanted += [lesson for lesson in available if first <= lesson <= (last if dash else first)]
        if not any(first <= lesson <= (last if dash else first) for lesson in available):
            raise ValueError(f"no lesson {part} (the lessons are {', '.join(available)})")
    return sorted(set(wanted))


def masters_of(solutions: Path, lessons: list[str] | None = None) -> list[Path]:
    """The masters, or only those of ``lessons``."""
    masters = sorted(solutions.glob("*.ipynb"))
    if lessons is None:
        return masters
    return [m for m in masters if lesson_of(nbformat.read(m, as_version=4)) in lessons]


# This run of the workflow (a re-run is a new attempt): the grading writes it into each results file, and each
# result step's command names it, so that only this run's results count.
RUN_ID = "${{ github.run_id }}-${{ github.run_attempt }}"
BUNDLE_DIR = ".grader"  # where the release's workflow unpacks the grading bundle (git-ignored)
BUNDLE_SECRETS = ("CRASHLAB_BUNDLE_URL", "CRASHLAB_BUNDLE_KEY", "CRASHLAB_GRADER_REPO", "CRASHLAB_GRADER_TOKEN")


def _grade_step(masters: list[Path], bundle: bool) -> list[str]:
    """The step that grades every notebook once: with this repository's masters, or the fetched bundle's."""
    stems = [master.stem for master in masters]
    if bundle:
        return ["      - name: Fetch the private grading bundle, set it up, grade every notebook once",
                "        env:",
                f"          CRASHLAB_RUN_ID: {RUN_ID}",
                *[f"          {name}: ${{{{ secrets.{name} }}}}" for name in BUNDLE_SECRETS],
                "        run: |",
                "          rm -f results-*.json  # a committed or stale results file never counts",
                f"          bash .github/classroom/grade.sh fetch {BUNDLE_DIR}",
                f"          bash .github/classroom/grade.sh grade {BUNDLE_DIR} {' '.join(stems)}"]
    return ["      - name: Set up the course and grade every notebook once",
            "        env:",
            f"          CRASHLAB_RUN_ID: {RUN_ID}",
            "        run: |",
            "          make setup",
            "          rm -f results-*.json  # a committed or stale results file never counts",
            *[f"          .venv/bin/crashlab grade course/{stem}.ipynb --json results-{stem}.json || true"
              for stem in stems]]


# GitHub Classroom makes each student's repository with a first commit of its own bot: nothing is answered
# yet, and grading it would only spend the class's Actions minutes.
CLASSROOM_BOT = "github-classroom[bot]"


def workflow(solutions: Path | None = None, bundle: bool = False, lessons: list[str] | None = None) -> str:
    """The workflow; ``bundle``: grade with the private grading bundle instead of ``solutions/`` (a student
    release, whose ``solutions`` are only read here for the exercises' names and points); ``lessons``: only
    these lessons' notebooks are graded and reported (a release of one lesson, or a range), each exercise with
    its own maximum."""
    solutions = solutions or repo_root() / "solutions"
    masters = masters_of(solutions, lessons)
    crashlab = f"{BUNDLE_DIR}/.venv/bin/crashlab" if bundle else ".venv/bin/crashlab"
    lines = [
        f"# Generated by `crashlab {'release' if bundle else 'classroom'}` from the master notebooks; do not edit by hand.",
        "# Lessons graded: " + ", ".join(lesson_of(nbformat.read(m, as_version=4)) or m.stem[:2] for m in masters),
        "name: Autograding",
        "on: [push, workflow_dispatch]",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  grade:",
        f"    if: github.actor != '{CLASSROOM_BOT}'",
        "    runs-on: ubuntu-latest",
        "    timeout-minutes: 60",
        "    steps:",
        "      - uses: actions/checkout@v4",
        "      - uses: actions/setup-python@v5",
        "        with:",
        "          python-version: '3.11'",
        *_grade_step(masters, bundle),
    ]
    ids = []
    for master in masters:
        for name, points in exercises(master):
            ids.append(step_id(master.stem, name))
            lines += [
                f"      - name: {master.stem} {name}",
                f"        id: {ids[-1]}",
                "        uses: classroom-resources/autograding-command-grader@v1",
                "        with:",
                f"          test-name: {json.dumps(f'{master.stem} {name}')}",
                f"          command: {crashlab} result results-{master.stem}.json --test {name} --run-id {RUN_ID}",
                "          timeout: 5",
                f"          max-score: {points}",
            ]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two exercises would share a step id: {sorted(i for i in ids if ids.count(i) > 1)}")
    lines += [
        "      - name: Autograding reporter",
        "        uses: classroom-resources/autograding-grading-reporter@v1",
        "        env:",
        *[f"          {runner.upper()}_RESULTS: \"${{{{steps.{runner}.outputs.result}}}}\"" for runner in ids],
        "        with:",
        "          runners: " + ",".join(ids),
    ]
    return "\n".join(lines) + "\n"


def step_id(stem: str, name: str) -> str:
    """The step id of one exercise's command-grader step, letters and digits only (see the module's docstring):
    ``02_idempotent_tools``, ``ex1_keys_checks`` -> ``lesson02ex1keyschecks``."""
    return "lesson" + "".join(ch for ch in f"{stem[:2]}{name}" if ch.isascii() and ch.isalnum())
