"""Helpers the lesson tests share: a master's files in a scratch folder, an edit that fails loudly when the
master no longer holds the text it replaces, and one check of a master judged on an edited answer."""

import shutil
import tempfile
from pathlib import Path

import nbformat

from crashlab.grading.checks import judge_checks
from crashlab.grading.grade import restore_locked_cells
from crashlab.grading.isolation import Deadline, Isolation
from crashlab.course.metadata import lesson_meta
from crashlab.course.notebooks import grade_id, is_test_cell, lesson_of, written_files

ROOT = Path(__file__).resolve().parents[1]


def write_master_files(master: Path, folder: Path):
    """Write every ``%%writefile`` file of ``master`` into ``folder``; return the master notebook."""
    nb = nbformat.read(master, as_version=4)
    for name, source in written_files(nb).items():
        (folder / name).write_text(source)
    return nb


def matrix_check(nb, name: str | None = None, points: list[str] | None = None, *, agent: str | None = None,
                 **changes) -> dict:
    """A copy of one of the master's graded matrices (by its ``name``, else by its ``agent``, else the first),
    to run on fewer points (``points``) or with other options (``changes``, such as ``double=[]``)."""
    checks = lesson_meta(nb)["matrix_checks"]
    check = dict(next(c for c in checks if (name is None or c["name"] == name) and (agent is None or c["agent"] == agent)))
    if points is not None:
        check["crash_points"] = points
    check.update(changes)
    return check


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path.name}: the master changed, update this test"
    path.write_text(text.replace(old, new))


def master_value(master: Path, gid: str, name: str):
    """What ``name`` is after the master's answer cell ``gid`` runs, computed as the judge computes it while
    grading (lesson 11's self-check letters: the key no library module holds)."""
    from crashlab.grading import references

    saved = dict(references.REFERENCES)
    references.REFERENCES.update(references.master_answers(nbformat.read(master, as_version=4), [gid]))
    try:
        return references.reference_value(gid, name)
    finally:
        references.REFERENCES.clear()
        references.REFERENCES.update(saved)


def judge_only(master_name: str, answer: str, old: str, new: str, check: str):
    """The master with ``old`` replaced by ``new`` in its answer cell ``answer``; the result of ``check``
    (the only check the judge runs)."""
    master = nbformat.read(ROOT / "solutions" / master_name, as_version=4)
    master.cells = [c for c in master.cells if not (is_test_cell(c) and grade_id(c) != check)]
    mutant = nbformat.read(ROOT / "solutions" / master_name, as_version=4)
    cell = next(c for c in mutant.cells if grade_id(c) == answer)
    assert old in cell.source, f"the mutation no longer applies to {answer}"
    cell.source = cell.source.replace(old, new)
    nb, _ = restore_locked_cells(mutant, master)
    workdir = Path(tempfile.mkdtemp(prefix="crashlab-mutant-"))
    (workdir / ".crashlab" / f"lesson{lesson_of(master)}").mkdir(parents=True)  # the notebook's cells make it
    for name, source in written_files(nb).items():
        (workdir / name).write_text(source)
    isolation = Isolation(workdir, False, hide=(), lesson=lesson_of(master))
    try:
        [result] = judge_checks(master, nb, isolation, Deadline(600))
        return result
    finally:
        isolation.close()
        shutil.rmtree(workdir, ignore_errors=True)
