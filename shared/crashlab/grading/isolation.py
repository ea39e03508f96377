"""Where a submission runs: as the sandbox user when grading as root, under one deadline.

The notebook run here only produces the student's files; nothing in it awards a point.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import nbformat

from crashlab.course.notebooks import lesson_of
from crashlab.engines.registry import server_binaries, student_env
from crashlab.grading.run_notebook import CELL_MARK
from crashlab.grading.report import GradingError
from crashlab.plumbing.sandbox_slot import SandboxSlot
from crashlab.plumbing.scratch import make_scratch, remove_scratch

if TYPE_CHECKING:
    from crashlab.plumbing.sandbox import Sandbox
    from crashlab.plumbing.sandbox_box import Limits, OwnNetwork


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
    """Where the submission's processes run, and how they all die: a sandbox user when root, in a box of the
    grading's own (see :mod:`crashlab.plumbing.sandbox_box`).

    The box is a folder of root's that no student's process can write, holding the grading's folders: ``grade``
    (the student's folder, ``workdir``), ``rows`` (the crash matrices' rows, ``scratch``), ``private`` (the worlds'
    ledgers, the judge's job: the grader's alone), ``lessons`` (earlier lessons' files the checks run) and
    ``refs`` (the runs on the reference answers: see :mod:`crashlab.grading.references`). Since the box's own
    folder is root's, a student's process cannot swap any of them for a link to somewhere else."""

    def __init__(self, workdir: Path | None, want: bool | None, hide: tuple[Path, ...], lesson: str = ""):
        from crashlab.plumbing import sandbox as sandboxes

        self.box = make_scratch("crashlab-box-")
        os.chmod(self.box, 0o711)
        self.workdir = Path(workdir) if workdir is not None else self.box / "grade"
        self.lesson = lesson
        self.notes: list[str] = []
        self.sealed: dict[str, object] = {}
        self.lesson_files: Path | None = None
        self.slot: SandboxSlot | None = None
        self.sandbox: Sandbox | None = None
        self.network: OwnNetwork | None = None
        self.limits: Limits | None = None
        self.mounted: list[Path] = []
        self.denied: list[str] = []  # what an ACL entry keeps from the sandbox users where there is no view
        self._already_running: set[int] = set()
        # The crash matrices' rows, worlds and agent outputs: a folder of root's that agents can pass through to
        # their own row but not list, and that the sandbox's view of the machine includes.
        self.scratch, self.private, self.refs, self.lessons, self.logs = (
            self.box / name for name in ("rows", "private", "refs", "lessons", "logs"))
        for folder, mode in ((self.scratch, 0o711), (self.private, 0o700), (self.refs, 0o700), (self.logs, 0o700),
                             (self.lessons, 0o755), *(((self.workdir, 0o700),) if workdir is None else ())):
            folder.mkdir()
            os.chmod(folder, mode)
        if want is None:
            want = sandboxes.can_isolate()
        try:
            if want:
                self._seal(hide)
            else:
                sandboxes.become_subreaper()
                self._already_running = set(sandboxes.descendants(os.getpid()))  # ours, not the submission's
            (self.workdir / "home").mkdir(exist_ok=True)
            # The submission's temporary folder, inside its own: a matrix it runs when it is killed at the deadline
            # leaves its scratch folders there, and they go with the submission's folder.
            (self.workdir / "home" / "tmp").mkdir(exist_ok=True)
            os.chmod(self.workdir / "home" / "tmp", 0o1777)  # like /tmp: crash users (one group) make folders there
            if self.sandbox is not None:
                self.sandbox.own(self.workdir)
                os.chmod(self.workdir, 0o770)  # the submission's folder: its sandbox user and crash users (one group)
                reference = sandboxes.Sandbox.from_json(self.sandbox.reference)
                os.chown(self.refs, 0, reference.gid)
                os.chmod(self.refs, 0o710)  # the reference user passes through; the student's users cannot
                (self.refs / "home").mkdir()
                reference.own(self.refs / "home")
                probe = self.popen([sys.executable, "-c", "pass"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if probe.wait(60) != 0:
                    raise GradingError(f"the sandbox user cannot run {sys.executable} (is a folder above it private, "
                                       "such as /root? `make setup` as root makes it traversable) -- or grade with "
                                       "--no-isolate")
        except BaseException:
            self.close()  # the sandbox slot, the box and its mounts are not left behind
            raise

    def _seal(self, hide) -> None:
        """The sandbox user and the box's seals, each where the machine allows it (the notes say what it did not)."""
        from crashlab.plumbing.sandbox_box import FILES_BYTES, FILES_COUNT, LOG_BYTES, Limits, OwnNetwork, mount_tmpfs
        from crashlab.plumbing.sandbox_users import CAP_SYS_PTRACE, MEMORY_LIMIT, PROCESS_LIMIT, has_capability

        see = (self.workdir, self.scratch, self.lessons)
        self.slot = SandboxSlot(self.workdir / "home", hide=tuple(hide), see=see,
                                reference=(self.refs / "home", (self.refs, self.scratch, self.lessons)))
        self.slot.leave_behind((self.box,))  # removed at its next use if we die
        self.sealed["view"] = self.slot.hidden
        self.sealed["ipc"] = self.slot.ipc
        if not self.slot.hidden:
            kept = self._deny_without_view(hide)
            self.notes.append("this machine allows no mount namespaces (a container without CAP_SYS_ADMIN?): the "
                              "student's code could read whatever the machine lets any user read" +
                              (" but this checkout's masters and the answers being graded (an ACL entry each keeps "
                               "them from its users)" if kept else ", the masters and the answers being graded "
                               "included") + ", and shares the machine's /dev/shm and IPC")
        elif not self.slot.ipc:
            self.notes.append("this machine allows no IPC namespaces: the student's processes share System V shared "
                              "memory and message queues with the machine's")
        # Every folder a student's process writes into, or whose file it holds open (the notebook runner's stderr,
        # which the kernel and all it starts inherit, is in ``logs``), is a file system of a size: none of them can
        # fill the machine's disk. The reference runs' folder is the student's code's too, run as another user, and
        # the earlier lessons' files are handed to the sandbox user for the checks whose matrices run the student's
        # agents beside them.
        files = [(folder, mount_tmpfs(folder, size, FILES_COUNT, mode)) for folder, mode, size in
                 ((self.workdir, 0o700, FILES_BYTES), (self.scratch, 0o711, FILES_BYTES),
                  (self.refs, 0o700, FILES_BYTES), (self.lessons, 0o755, FILES_BYTES), (self.logs, 0o700, LOG_BYTES))]
        self.mounted = [folder for folder, why in files if why is None]
        self.sealed["files"] = f"{FILES_BYTES // 1024 ** 2} MiB and {FILES_COUNT} files" if not any(
            why for _, why in files) else False
        if any(why for _, why in files):
            self.notes.append(f"no file system of its own for the student's folders ({next(w for _, w in files if w)}): "
                              "the files and bytes the student's processes write are not capped")
        self.limits = Limits(f"{CGROUP_NAME}{self.slot.slot}")
        self.sealed["limits"] = f"cgroup {self.limits.version}" if self.limits.paths else False
        if self.limits.paths:
            self.slot.limit(self.limits.paths)
        else:
            self.notes.append(f"no cgroup for the grading ({self.limits.why}): its memory and processes are capped per "
                              f"process only ({MEMORY_LIMIT // 1024 ** 3} GiB of address space each, "
                              f"{PROCESS_LIMIT} processes per user)")
        if not has_capability(CAP_SYS_PTRACE):
            self.notes.append("no CAP_SYS_PTRACE (a container's default): the world cannot see which of the student's "
                              "processes hold a connection, so it tells a crashed run's requests by the user that made "
                              "the connection (each crashed run has a user of its own)")
        self.sandbox = self.slot.sandbox
        self.network = OwnNetwork()
        self.sealed["network"] = self.network.ok
        if not self.network.ok:
            self.notes.append(f"no network namespace for the grading ({self.network.why}): its processes share the "
                              "machine's loopback, where another grading's worlds and servers are reachable")

    def _deny_without_view(self, hide) -> bool:
        """With no view of its own, what ``hide`` names stays readable by any user: an ACL entry per sandbox user that
        grants nothing (see :mod:`crashlab.plumbing.sandbox_acl`), taken off at :meth:`close`. Whether all were set."""
        from crashlab.answers import answer_files
        from crashlab.plumbing.sandbox_acl import allow, deny

        assert self.slot is not None
        uids = self.slot.sandbox.uids
        allow(answer_files("00"), uids)  # what a grader killed in this slot left on: a later lesson needs them
        wanted = [str(path) for path in hide if os.path.lexists(path)]
        self.denied = deny(wanted, uids)
        return len(self.denied) == len(wanted)

    def give_lesson_files(self, lessons: list[str], solutions: Path) -> None:
        """A lesson that runs earlier lessons' reference agents gets just those files, not the masters: written by
        root into a folder of the box that no student's process has ever had (so nothing planted can be followed),
        then handed to the sandbox user for the checks (the student's kernel is dead by now, and the student's code
        that the checks call does not see the folder)."""
        from crashlab.course.notebooks import written_files

        for master in sorted(solutions.glob("*.ipynb")):
            nb = nbformat.read(master, as_version=4)
            lesson = lesson_of(nb)
            if lesson is not None and lesson in lessons:
                folder = self.lessons / lesson
                folder.mkdir(mode=0o755)
                for name, source in written_files(nb).items():
                    write_new_file(folder / name, source)
        if self.sandbox is not None:  # the checks copy them where they run them (crashlab.lessons.kernel)
            self.sandbox.own(self.lessons)
        self.lesson_files = self.lessons

    def take_lesson_files_back(self) -> None:
        if self.lesson_files is not None:
            for folder in self.lesson_files.iterdir():
                remove_scratch(folder)
            self.lesson_files = None

    @property
    def isolated(self) -> bool:
        return self.sandbox is not None

    def env(self, trusted: bool = True) -> dict[str, str]:
        """The environment of a process of the grading run: an allow-list of the grader's (never its own tokens or
        keys, whatever their names, even for the trusted judge, whose launcher forks agents); only trusted ones
        learn the private folders."""
        from crashlab.plumbing import sandbox as sandboxes

        kept = ("CRASHLAB_ROOT", *server_binaries())  # the course, and where the engines' servers' binaries are
        own = {k: v for k, v in os.environ.items() if not k.startswith("CRASHLAB_") or k in kept}  # not its servers'
        env = {**sandboxes.student_env(own, engines=student_env()), **{k: own[k] for k in kept if k in own}}
        env.update({"HOME": str(self.workdir / "home"), "JUPYTER_RUNTIME_DIR": str(self.workdir / "home" / "runtime"),
                    "MPLCONFIGDIR": str(self.workdir / "home" / "mpl"), "CRASHLAB_PRIVATE_DIR": str(self.private),
                    "CRASHLAB_REFERENCE_DIR": str(self.refs),
                    "PYTHONDONTWRITEBYTECODE": "1", sandboxes.ENV_GRADING_LESSON: self.lesson,
                    # the judge works with the student's file rights, in folders the student's processes see
                    "TMPDIR": str(self.workdir / "home" / "tmp")})
        env.pop(sandboxes.ENV_SANDBOX, None)
        if self.lesson_files is not None:
            env["CRASHLAB_LESSON_FILES"] = str(self.lesson_files)
        if not trusted:
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

    def peak(self) -> dict[str, int]:
        """The most the student's processes took together (processes and threads, bytes of memory), where measured."""
        return self.limits.peak() if self.limits is not None else {}

    def limits_met(self) -> list[str]:
        """Which of the grading's limits its processes met (memory, processes, files), in words."""
        from crashlab.plumbing.sandbox_box import FILES_BYTES, FILES_COUNT, LOG_BYTES, full

        said = self.limits.hit() if self.limits is not None else []
        for folder, name in ((self.workdir, "the student's folder"), (self.scratch, "the crash rows' folder"),
                             (self.refs, "the reference runs' folder"), (self.lessons, "the earlier lessons' folder"),
                             (self.logs, "the notebook's log")):
            used = full(folder) if folder in self.mounted else None
            if used:
                size = LOG_BYTES if folder == self.logs else FILES_BYTES
                cap = f"{FILES_COUNT} files" if used == "files" else f"{size // 1024 ** 2} MiB"
                said.append(f"the submission's processes filled {name} (its limit: {cap}); what needed to write "
                            "there after that could not")
        return said

    def keep(self) -> Path:
        """A copy of the student's folder that outlives the grading (its own file system goes at :meth:`close`) and
        that no later command's sweep removes: ``crashlab-kept-*`` in the temporary folder. Links are copied as
        links, never followed."""
        kept = Path(tempfile.mkdtemp(prefix="crashlab-kept-"))
        subprocess.run(["cp", "-a", "--no-dereference", f"{self.workdir}/.", str(kept)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        return kept

    def close(self) -> None:
        from crashlab.plumbing import sandbox as sandboxes
        from crashlab.plumbing.sandbox_box import unmount

        self.kill_everything()
        if self.network is not None:
            self.network.leave()
        for folder in self.mounted:
            unmount(folder)  # whatever is in it, at once
        self.mounted = []
        if self.limits is not None:
            self.limits.remove()
        if self.denied and self.slot is not None:
            from crashlab.plumbing.sandbox_acl import allow

            allow(self.denied, self.slot.sandbox.uids)
            self.denied = []
        if self.slot is not None:
            self.slot.close()
        else:
            sandboxes.become_subreaper(False)
        remove_scratch(self.box)


CGROUP_NAME = "crashlab-grading-slot"


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
    # stderr to a file, not a pipe: children that inherit it cannot make us wait once the notebook is done. The kernel
    # and everything it starts inherit it too, so it is on a file system of its own, a few MiB (see Isolation._seal).
    log = isolation.logs / "run_notebook.log"
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
        notes += [line for line in _ends(log).splitlines() if line.startswith("the ")][:3]
    except subprocess.TimeoutExpired:
        notes.append(f"the notebook was still running at the deadline ({deadline.seconds:.0f} s): it was stopped, "
                     "and every process it started was killed")
    isolation.kill_everything()
    process.wait()
    return notes


def _tell_cells(log: Path, told: int, on_cell: Callable[[int, int], None] | None) -> int:
    """Tell ``on_cell`` of each ``CELL i/n`` line the notebook's runner wrote to ``log`` since byte ``told``; returns
    where it stopped. The kernel writes there too, as much as it likes: a bounded piece is read at a time."""
    from crashlab.plumbing.sandbox_box import LOG_BYTES

    with open(log, "rb") as f:
        f.seek(told)
        data = f.read(LOG_BYTES)
    end = data.rfind(b"\n") + 1 or (len(data) if len(data) == LOG_BYTES else 0)
    for line in data[:end].decode(errors="replace").splitlines():
        if on_cell is not None and line.startswith(CELL_MARK):
            with contextlib.suppress(ValueError):
                index, count = line[len(CELL_MARK):].split("/")
                on_cell(int(index), int(count))
    return told + end


def _ends(log: Path, size: int = 1 << 16) -> str:
    """The first and the last ``size`` bytes of ``log`` (the runner's own words are at its start and its end)."""
    with open(log, "rb") as f:
        head = f.read(size)
        f.seek(max(len(head), os.fstat(f.fileno()).st_size - size))
        return (head + b"\n" + f.read(size)).decode(errors="replace")
