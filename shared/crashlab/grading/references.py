"""Grade an exercise on its own merit: run the student's agent on the master's answers to the exercises
it builds on.

Lesson 4's workflow (exercise 2) imports the steps of exercise 1. Crash-tested as written, a wrong step
(a ``uuid4()`` key) would cost exercise 2's points as well as exercise 1's. So the checks that judge the
workflow run a copy of the student's files with the earlier exercise's file replaced by the master's.

The master's answers reach only the trusted judge (in its job, a file in the grader's own folder) and the
grader; the copy is made after the earlier exercise has been judged, so the student's code of that exercise
never runs beside it. And never in the student's folder: a check or a matrix that runs on the reference answers does
so in a *reference workspace* (:func:`reference_workspace`), a copy of the student's files in a folder of the
grading's box that only the grading's reference user can enter, and everything it starts runs as that user
(:func:`crashlab.plumbing.sandbox.reference_runs`). A run that holds the master's answers can print them, store them
or copy them over the student's own files: as a user of its own, in a view of the machine that holds neither the
student's folder nor anything the student's processes read, none of that reaches them, and the judge quotes
nothing of such a check's words (see :mod:`crashlab.grading.judge`).
Outside grading -- the learner's own kernel, a master executed by its author -- there are no references and
the agent runs as it is.

An answer that is a cell's names rather than a file (lesson 11's self-check letters) is a key the same way:
the judge holds it (:func:`reference_value`) and no library module does, so nothing a notebook can import
confirms a graded answer.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

from crashlab.plumbing import sandbox as sandboxes
from crashlab.grading.answer_cells import answer_cell
from crashlab.course.metadata import lesson_meta

# grade_id -> (file name, text), the file name None for a cell that is not a file: set by the judge from its
# job; empty outside grading.
REFERENCES: dict[str, tuple[str | None, str]] = {}
SOLUTION_MARKERS = ("# BEGIN SOLUTION", "# END SOLUTION", "### BEGIN SOLUTION", "### END SOLUTION")


def master_answers(master, grade_ids) -> dict[str, tuple[str | None, str]]:
    """The master's answer cells named by ``grade_ids``, without their solution markers: for a ``%%writefile``
    cell the file it writes and its text, for a cell of plain Python None and its source."""
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in master.cells}
    answers: dict[str, tuple[str | None, str]] = {}
    for gid in grade_ids:
        cell = cells.get(gid)
        first, _, body = (cell.source if cell is not None else "").partition("\n")
        if first.startswith("%%writefile "):
            name = first.split(maxsplit=1)[1].strip()
        elif cell is not None and answer_cell(cell):
            name, body = None, cell.source
        else:
            raise ValueError(f"the master has no %%writefile answer cell {gid!r}, nor a plain answer cell of that id")
        text = "\n".join(line for line in body.splitlines() if line.strip() not in SOLUTION_MARKERS)
        answers[gid] = (name, text + "\n")
    return answers


def lesson_references(master) -> dict[str, tuple[str | None, str]]:
    """The master's answers that its lesson metadata names in ``reference_answers``."""
    return master_answers(master, lesson_meta(master).get("reference_answers", []))


USES_REFERENCES = "on_reference_answers"  # a check whose source says this runs on the reference answers


def _copy_python_files(source: Path, target: Path) -> None:
    """The top-level ``.py`` files of ``source`` into ``target``: each a regular file opened without following a
    link (root reads a folder the student's code wrote), at most 4 MB."""
    for path in source.glob("*.py"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # a symlink, or gone
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                (target / path.name).write_bytes(f.read(1 << 22))


@contextmanager
def reference_workspace(workdir: Path, chdir: bool = False):
    """A folder for runs on the reference answers, with a copy of the student's ``.py`` files from ``workdir``, and
    every process started meanwhile run as the reference user (see the module's docstring); yields its path, and
    removes it at the end, once those processes are dead. ``chdir``: the process works there meanwhile, with the
    reference user's file rights (the judge: a check's relative paths, its worlds' folders, land in the workspace,
    not in the student's folder). Outside an isolated grading it is a scratch folder of the grader's, and the runs
    are the grader's own."""
    from crashlab.plumbing.sandbox_users import fs_ids, own_tree, set_fs_ids
    from crashlab.plumbing.scratch import make_scratch, remove_scratch

    student = sandboxes.current(student=True)
    reference = sandboxes.Sandbox.from_json(student.reference) if student and student.reference else None
    root = os.geteuid() == 0 and reference is not None
    within = os.environ.get("CRASHLAB_REFERENCE_DIR")
    previous = fs_ids() if root else None
    if root:
        set_fs_ids(0, 0)
    folder = Path(tempfile.mkdtemp(prefix="check-", dir=within)) if within else make_scratch("crashlab-references-")
    back, tmp = os.getcwd(), (tempfile.tempdir, os.environ.get("TMPDIR"))
    try:
        _copy_python_files(Path(workdir), folder)
        if chdir:  # the check's own scratch folders too: the student's temporary folder is not the reference user's
            (folder / ".tmp").mkdir(mode=0o700)
            tempfile.tempdir = os.environ["TMPDIR"] = str(folder / ".tmp")
        if reference is not None and previous is not None:  # root, with a reference user
            own_tree(folder, reference.uid, reference.gid)
            if chdir:
                set_fs_ids(reference.uid, reference.gid)  # what the check makes there is the reference user's
            else:
                set_fs_ids(*previous)
        if chdir:
            os.chdir(folder)
        with sandboxes.reference_runs():
            yield folder
    finally:
        if root:
            set_fs_ids(0, 0)
        if chdir:
            os.chdir(back)
            tempfile.tempdir = tmp[0]
            if tmp[1] is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = tmp[1]
        remove_scratch(folder)
        if previous is not None:
            set_fs_ids(*previous)


def copy_on_answers(agent: Path, answers: dict[str, tuple[str, str]]) -> Path:
    """A copy of the agent's folder's Python files in a new folder beside them, with ``answers`` written
    over them; the copied agent's path.

    While grading, ``agent`` is in a reference workspace (:func:`reference_workspace`), never the student's folder.
    The new folder gets a random name made exclusively (nothing planted can be followed into), and a file is
    copied only when it is a regular file opened without following a symlink."""
    agent = Path(os.path.abspath(agent))
    folder = Path(tempfile.mkdtemp(prefix=f".on-reference-{agent.stem}-", dir=agent.parent))
    _copy_python_files(agent.parent, folder)
    for name, text in answers.values():
        if name is not None:  # a cell's names are not a file of the agent's
            (folder / name).write_text(text)
    sandboxes.give(folder)
    return folder / agent.name


def on_reference_answers(agent: str | Path) -> Path:
    """``agent`` as the checks should run it: while grading, a copy that uses the master's answers to the
    exercises it builds on (see the module's docstring); otherwise ``agent`` itself."""
    files = {gid: (name, text) for gid, (name, text) in REFERENCES.items() if name is not None}
    if not files:
        return Path(agent)
    if not sandboxes.in_reference_runs():  # never beside the student's code (a check that names it runs in one)
        raise RuntimeError("on_reference_answers is for a check that runs in a reference workspace")
    return copy_on_answers(Path(agent), files)


def reference_value(gid: str, name: str):
    """While grading, in the judge: the value ``name`` has after the master's answer cell ``gid`` runs on its
    own (lesson 11's self-check letters), for a check to compare the student's with. None outside grading,
    where no process holds the key -- there the master's own run is the answer, and nothing to compare."""
    if gid not in REFERENCES:
        return None
    namespace: dict = {"__name__": "__reference__"}
    exec(compile(REFERENCES[gid][1], f"the master's {gid}", "exec"), namespace)  # noqa: S102 -- the master's own cell
    return namespace[name]
