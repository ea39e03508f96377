"""Where a submission runs: as the sandbox user when grading as root, under one deadline.

The notebook run here only produces the student's files; nothing in it awards a point.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import nbformat

from crashlab.course.notebooks import lesson_of
from crashlab.engines.registry import server_binaries, student_env
from crashlab.grading.run_notebook import CELL_MARK
from crashlab.grading.report import GradingError
from crashlab.plumbing.sandbox_slot import SandboxSlot
from crashlab.plumbing.scratch import make_scratch, remove_scratch


def write_new_file(path: Path, text: str) -> None:
    """Write a file into the student's folder as the grader: whatever the student left at that name (a
    symlink to a file of root's, say) is removed first, and the new file is created, never followed."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)


class Deadline:
    """One wall-clock limit for the whole submission."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def passed(self) -> bool:
        return self.left() <= 0


class Isolation:
    """Where the submission's processes run, and how they all die: a sandbox user when root."""

    def __init__(self, workdir: Path, want: bool | None, hide: tuple[Path, ...], lesson: str = ""):
        from crashlab.plumbing import sandbox as sandboxes

        self.workdir = workdir
        self.lesson = lesson
        self.notes: list[str] = []
        self.lesson_files: Path | None = None
        self.slot = None
        self.sandbox = None
        self._already_running: set[int] = set()
        # The crash matrices' rows, worlds and agent outputs: a folder of root's that agents can pass through to
        # their own row but not list, and that the sandbox's view of the machine includes.
        self.scratch = make_scratch("crashlab-rows-")
        os.chmod(self.scratch, 0o711)
        if want is None:
            want = sandboxes.can_isolate()
        if want:
            self.slot = SandboxSlot(workdir / "home", hide=tuple(hide), see=(workdir, self.scratch))
            self.sandbox = self.slot.sandbox
            if not self.slot.hidden:
                self.notes.append("this machine allows no mount namespaces (a container without CAP_SYS_ADMIN?): "
                                  "the student's code could read whatever the machine lets any user read, the "
                                  "masters and the answers being graded included")
        else:
            sandboxes.become_subreaper()
            self._already_running = set(sandboxes.descendants(os.getpid()))  # ours, not the submission's
        (workdir / "home").mkdir(exist_ok=True)
        # The submission's temporary folder, inside its own: a matrix it runs when it is killed at the deadline
        # leaves its scratch folders there, and they go with the submission's folder.
        (workdir / "home" / "tmp").mkdir(exist_ok=True)
        os.chmod(workdir / "home" / "tmp", 0o1777)  # like /tmp: crash users (one group) make folders there too
        self.private = make_scratch("crashlab-private-")  # the worlds' ledgers: ours alone
        if self.slot is not None:
            self.slot.leave_behind((workdir, self.scratch, self.private))  # removed at its next use if we die
        try:
            os.chmod(self.private, 0o700)
            if self.sandbox is not None:
                self.sandbox.own(workdir)
                os.chmod(workdir, 0o770)  # this submission's folder: its sandbox user and crash users (one group) only
                probe = self.popen([sys.executable, "-c", "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if probe.wait(60) != 0:
                    raise GradingError(f"the sandbox user cannot run {sys.executable} (is a folder above it private, "
                                       "such as /root? `make setup` as root makes it traversable) -- or grade with "
                                       "--no-isolate")
        except BaseException:
            self.close()  # the sandbox slot and the private folder are not left behind
            raise

    def give_lesson_files(self, lessons: list[str], solutions: Path) -> None:
        """A lesson that runs earlier lessons' reference agents gets just those files, not the masters."""
        from crashlab.course.notebooks import written_files

        target = self.workdir / "home" / "lesson-files"
        for master in sorted(solutions.glob("*.ipynb")):
            nb = nbformat.read(master, as_version=4)
            lesson = lesson_of(nb)
            if lesson is not None and lesson in lessons:
                (target / lesson).mkdir(parents=True, exist_ok=True)
                for name, source in written_files(nb).items():
                    (target / lesson / name).write_text(source)
        self.lesson_files = target
        if self.sandbox is not None:
            self.sandbox.own(self.workdir / "home")

    def take_lesson_files_back(self) -> None:
        if self.lesson_files is not None:
            remove_scratch(self.lesson_files)
            self.lesson_files = None

    @property
    def isolated(self) -> bool:
        return self.sandbox is not None

    def env(self, trusted: bool = True) -> dict[str, str]:
        """The environment of a process of the grading run; only trusted ones learn the private folder."""
        from crashlab.plumbing import sandbox as sandboxes

        kept = ("CRASHLAB_ROOT", *server_binaries())  # the course, and where the engines' servers' binaries are
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHLAB_") or k in kept}
        env.update({"HOME": str(self.workdir / "home"), "JUPYTER_RUNTIME_DIR": str(self.workdir / "home" / "runtime"),
                    "MPLCONFIGDIR": str(self.workdir / "home" / "mpl"), "CRASHLAB_PRIVATE_DIR": str(self.private),
                    "PYTHONDONTWRITEBYTECODE": "1", sandboxes.ENV_GRADING_LESSON: self.lesson,
                    # the judge works with the student's file rights, in folders the student's processes see
                    "TMPDIR": str(self.workdir / "home" / "tmp")})
        if self.lesson_files is not None:
            env["CRASHLAB_LESSON_FILES"] = str(self.lesson_files)
        if not trusted:
            env["TMPDIR"] = str(self.workdir / "home" / "tmp")
            env = sandboxes.student_env(env, engines=student_env())  # never the grader's own, whatever their names
        if self.sandbox is not None:
            env = self.sandbox.env(env)
        return env

    def popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        """Start untrusted code: as the sandbox user, in a session of its own, with the caps."""
        from crashlab.plumbing import sandbox as sandboxes

        demote = self.sandbox.demote if self.sandbox is not None else sandboxes.apply_limits
        from crashlab.plumbing.process_tree import die_with_parent

        return subprocess.Popen(cmd, cwd=self.workdir, env=self.env(trusted=False), start_new_session=True,
                                preexec_fn=die_with_parent(then=demote),  # a grader killed by SIGKILL takes it along
                                **kwargs)

    def kill_everything(self) -> None:
        """Every process the submission started, whatever its session or signal handlers."""
        from crashlab.plumbing import sandbox as sandboxes

        if self.sandbox is not None:
            self.sandbox.kill_all()
        else:  # everything below us that was not already running when grading began
            sandboxes.kill_descendants(keep=self._already_running)

    def close(self) -> None:
        from crashlab.plumbing import sandbox as sandboxes

        self.kill_everything()
        if self.slot is not None:
            self.slot.close()
        else:
            sandboxes.become_subreaper(False)
        remove_scratch(self.private)
        remove_scratch(self.scratch)


NOT_RUN_WHILE_GRADING = "# not run while grading: no point depends on this cell (see the README, How grading works)"


def keep_only_what_the_submission_writes(nb, master) -> int:
    """While grading, the kernel runs only the cells that make the submission: the ``%%writefile`` cells
    (the agents and modules the checks use), the answer cells, and whatever the student added or changed.
    The master's own checks and demonstrations award nothing there, so they are blanked: grading is
    faster, and none of them can hang it. Returns how many cells were blanked."""
    from crashlab.course.notebooks import is_answer_cell
    from crashlab.grading.build import as_given_to_students

    # As the master has it, or as the student notebook shows it (nbval comments moved to tags).
    given = {source for cell in master.cells if cell.cell_type == "code" and not is_answer_cell(cell)
             for source in (cell.source, as_given_to_students(cell))}
    blanked = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source in given and not cell.source.startswith("%%writefile"):
            cell.source, cell.outputs = NOT_RUN_WHILE_GRADING, []
            blanked += 1
    return blanked


def run_submission(nb, isolation: Isolation, deadline: Deadline, cell_timeout: int,
                   executed: Path | None = None, on_cell: Callable[[int, int], None] | None = None) -> list[str]:
    """Run the notebook as the student until it ends or the deadline passes; return notes. ``executed``: where
    to save the notebook with its outputs (the learner's self-check reads them; grading never does). ``on_cell(i, n)``:
    told as the kernel starts the notebook's cell i of n (a lesson's cells take minutes on a loaded machine)."""
    source = isolation.workdir / "submission.ipynb"
    nbformat.write(nb, source)
    if isolation.sandbox is not None:
        isolation.sandbox.own(isolation.workdir)
    # stderr to a file, not a pipe: children that inherit it cannot make us wait once the notebook is done
    log = isolation.private / "run_notebook.log"
    with open(log, "wb") as err:
        process = isolation.popen([sys.executable, "-m", "crashlab.grading.run_notebook", str(source),
                                   str(cell_timeout), str(isolation.workdir), *([str(executed)] if executed else [])],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    notes = []
    told = 0
    try:
        while True:
            try:
                process.wait(timeout=min(0.5, max(0.05, deadline.left())) if on_cell else max(1.0, deadline.left()))
                break
            except subprocess.TimeoutExpired:
                if deadline.passed:
                    raise
                told = _tell_cells(log, told, on_cell)
        _tell_cells(log, told, on_cell)
        text = log.read_text(errors="replace")
        notes += [line for line in text.splitlines() if line.startswith("the ")][:3]
    except subprocess.TimeoutExpired:
        notes.append(f"the notebook was still running at the deadline ({deadline.seconds:.0f} s): it was stopped, "
                     "and every process it started was killed")
    isolation.kill_everything()
    process.wait()
    return notes


def _tell_cells(log: Path, told: int, on_cell: Callable[[int, int], None] | None) -> int:
    """Tell ``on_cell`` of each ``CELL i/n`` line the notebook's runner wrote to ``log`` since line ``told``."""
    lines = log.read_text(errors="replace").splitlines()
    for line in lines[told:]:
        if on_cell is not None and line.startswith(CELL_MARK):
            with contextlib.suppress(ValueError):
                index, count = line[len(CELL_MARK):].split("/")
                on_cell(int(index), int(count))
    return len(lines)
