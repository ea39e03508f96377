"""The judge: a fresh trusted process that runs each graded check and decides its points.

A check is the master's test cell (visible and hidden parts), run here -- never in the student's
kernel, so nothing the student's cells did to their kernel (input transformers, redefined helpers,
patched ``assert`` machinery) reaches it. When a check imports one of the student's modules it gets a
proxy: every call crosses into a *subject* process (:mod:`crashlab.grading.subject`) that runs as the
sandbox user, and only plain data comes back (see :mod:`crashlab.grading.remote`). The asserts run
here, and the hidden expectations never leave this process.

The grader starts ``python -m crashlab.grading.judge JOB`` (forked from its warm launcher, or a new interpreter)
with the path of a JSON job in the grader's own folder, and reads one JSON result per check from its stdout.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Sequence

from crashlab.harness.launcher import fork_kept_launcher
from crashlab.plumbing.lazy import lazy_module
from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.plumbing import sandbox as sandboxes
from crashlab.plumbing.process_tree import exit_when_orphaned
from crashlab.grading import references
from crashlab.grading.proxies import StudentModules, Subject
from crashlab.grading.answer_cells import load_answer_cells, why_undefined
from crashlab.grading.requirements import first_requirement, requirement_at

HIDDEN_BEGIN, HIDDEN_END = "# BEGIN HIDDEN TESTS", "# END HIDDEN TESTS"
# What every check may use without importing it (the lessons' notebooks import these early on). ``anthropic`` is
# bound lazily (:func:`crashlab.plumbing.lazy.lazy_module`): its import is 1.3 s to 2 s of CPU in every grading, and most lessons' checks
# never touch it.
BASE_PREAMBLE = """
import json, os, subprocess, sys, time
from pathlib import Path
import crashlab
from crashlab.agent import MAX_TOKENS, MODEL, TOOLS
"""


# --- running checks -----------------------------------------------------------------------------------------
def hidden_lines(source: str) -> set[int]:
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), start=1):
        if line.strip() == HIDDEN_BEGIN:
            inside = True
        if inside:
            lines.add(number)
        if line.strip() == HIDDEN_END:
            inside = False
    return lines


def feedback(exc: BaseException, source: str) -> str:
    """Words for a failed check: what was expected and what came back, and the requirement whose check it was,
    never a hidden line of code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<check>"]
    line = frames[-1].lineno if frames else None
    requirement = requirement_at(source, line) if line and source else None
    about = f" (requirement {requirement})" if requirement else ""
    in_check = f", in the check of requirement {requirement}" if requirement else ""
    if requirement is None and line and source and first_requirement(source):
        # the set-up above the cell's first marker failed: it was preparing that requirement's check
        requirement = first_requirement(source)
        about = in_check = f", while preparing the check of requirement {requirement}"
    student = getattr(exc, "__student__", None)
    if student:
        where = getattr(exc, "__where__", "")
        at = f" ({where})" if where and where not in student else ""
        from crashlab.course.placeholder import placeholder_raised  # on a failure only: the course's rule for one

        if placeholder_raised(exc):  # the student notebook's placeholder, still raising
            return f"not answered yet: your code still raises {student}{at}, the placeholder's exception{in_check}"
        return f"your code raised {student}{at}{in_check}"
    hidden = line in hidden_lines(source) if line else True
    message = str(exc).strip()
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = f"no key {exc.args[0]!r}"  # str(KeyError) is the key's bare repr
    if isinstance(exc, AssertionError):
        if message.startswith("not answered yet"):  # the cause first, as for a placeholder raised in the check
            return f"{message}{in_check}"
        if message:
            return f"check failed{about}: {message}"
        if not hidden and line:
            return f"check failed{about}: {source.splitlines()[line - 1].strip()}"
        if requirement:
            return f"a hidden check of requirement {requirement} failed: compare your answer with what the text says"
        return "a hidden check failed (it has no message: compare your answer with every requirement in the text)"
    return cut_at_word(f"{type(exc).__name__}{about}: {message}" if message else
                       f"{type(exc).__name__}{about} (with no message)", 1500)


def reference_feedback(exc: BaseException, source: str) -> str:
    """Words for a failed check that ran the student's code on the reference answers: the requirement it checks,
    and nothing that came from the run -- what the code printed, raised or stored there could hold those answers."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<check>"]
    line = frames[-1].lineno if frames else None
    requirement = (requirement_at(source, line) if line else None) or first_requirement(source)
    about = f" (requirement {requirement})" if requirement else ""
    what = "check failed" if isinstance(exc, AssertionError) else f"the check stopped ({type(exc).__name__})"
    if getattr(exc, "__student__", None):
        what = "your code raised an exception"
    return (f"{what}{about}: this check runs your file with the course's answers to the other exercises, so it shows "
            "nothing your code printed, raised or stored there; compare your code with the requirement")


def kill_students_processes() -> None:
    """Every process of the student's users (the subject's daemons, an agent left running), as root: nothing of the
    student's outlives a check. Outside an isolated grading, nothing to do (the subject's group is killed)."""
    sandbox = sandboxes.current(student=True)
    if sandbox is not None and os.geteuid() == 0:
        # the crash users' processes die with each crashed run (crashlab.plumbing.sandbox.crash_user): only a
        # straggler there, while the sandbox user's are killed whatever a listing shows (a pid hopper is on none)
        running = {uid for _, uid in sandboxes.all_processes()}
        for uid in (sandbox.uid, *(uid for uid, _ in sandbox.crash_users if uid in running)):
            sandboxes.kill_every_process_of(uid, sandbox.gid)


def stop_worlds() -> None:
    from crashlab.world.scenes import stop_worlds as stop  # the scenes' own list of the worlds a check started

    stop()


def run_code(source: str, filename: str, namespace: dict) -> None:
    """Run a cell's code as the notebook would, top-level ``await`` included."""
    code = compile(source, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:
        loop = namespace.setdefault("__loop__", asyncio.new_event_loop())
        loop.run_until_complete(eval(code, namespace))  # noqa: S307 -- the master's own code
    else:
        exec(code, namespace)  # noqa: S102 -- the master's own code


class Checks:
    """The master's checks, run one after another in one namespace, as the notebook's cells would be:
    the given cells (the preamble) run once, before the first check that needs them."""

    def __init__(self, workdir: Path, preamble: str, answer_cells: list[dict], timeout: float,
                 student_modules: Sequence[str] = ()):
        self.workdir, self.preamble, self.answer_cells, self.timeout = workdir, preamble, answer_cells, timeout
        self.student_modules = {*student_modules, *(str(cell["module"]) for cell in answer_cells)}
        # Where the student's code prints while a check calls it: opened once, before any check changes this
        # process's file rights (a check on the reference answers works with the reference user's).
        log = workdir / ".crashlab-subject.log"
        try:
            log.unlink(missing_ok=True)  # whatever the student's kernel left there (a link, say): a new file of ours
            self.log = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        except OSError:  # a folder by that name, a full disk: what the student's code prints is not kept
            self.log = os.open(os.devnull, os.O_WRONLY)
        self.namespace: dict = {"__name__": "__check__", "anthropic": lazy_module("anthropic")}
        # The library the checks use is imported before any finder of the student's is in place. ``anthropic``,
        # loaded on its first use inside a check, still gets the real library: the judge runs with ``-P`` (no folder
        # of the student's on its path), and StudentModules proxies only the master's own module names.
        run_code(BASE_PREAMBLE, "<base>", self.namespace)
        self.prepared = False

    def run(self, check: dict) -> dict:
        """One check. A check that runs the student's code on the reference answers (its source names
        ``on_reference_answers``) runs in a reference workspace, as the reference user (see
        :mod:`crashlab.grading.references`): the student's own processes are all gone first, its code called from
        the check runs with no network, and its failure is said without quoting anything of the run."""
        on_references = references.USES_REFERENCES in check["source"]
        deadline = time.monotonic() + self.timeout
        finder = StudentModules(self.workdir, self.student_modules,
                                start=lambda: Subject(self.workdir, deadline, self.log, offline=on_references))
        started = time.monotonic()
        unbound: dict = {}
        if on_references:
            kill_students_processes()
        sys.meta_path.insert(0, finder)
        try:
            if not self.prepared:
                run_code(self.preamble, "<preamble>", self.namespace)  # the master's own given cells
                self.prepared = True
            if on_references:
                stop_worlds()  # the earlier checks' worlds, in the student's folder: stopped with the student's rights
            with references.reference_workspace(self.workdir, chdir=True) if on_references else nullcontext():
                try:
                    # answers written as cells, not files: proxies for the names they define, each cell on its own
                    unbound = load_answer_cells(self.answer_cells, self.namespace)
                    run_code(check["source"], "<check>", self.namespace)
                finally:
                    if on_references:
                        stop_worlds()  # and this check's, in the workspace, with the reference user's
            result = {"name": check["name"], "passed": True, "feedback": "passed"}
        except BaseException as exc:  # noqa: BLE001 -- any failure is a failed check, with words for why
            if isinstance(exc, KeyboardInterrupt):
                raise
            if on_references:
                words = reference_feedback(exc, check["source"])
            else:
                words = why_undefined(exc, unbound, lambda error: feedback(error, "")) or feedback(exc, check["source"])
            result = {"name": check["name"], "passed": False, "feedback": words}
        finally:
            sys.meta_path.remove(finder)
            finder.forget()
            kill_students_processes()  # a daemon one check's code left cannot act in the next check
        result["seconds"] = round(time.monotonic() - started, 2)
        return result

    def close(self) -> None:
        stop_worlds()
        if "__loop__" in self.namespace:
            self.namespace["__loop__"].close()
        sandboxes.kill_descendants()  # servers and launchers the given cells started


def main() -> None:
    # Forked from the grader's launcher, the judge has the SDK imported: its own launcher can be a fork of it, made
    # now, while it has one thread and has not read its job, so no agent it forks holds the hidden checks.
    fork_kept_launcher()
    exit_when_orphaned()  # a grader killed by SIGKILL takes its judge along (and the judge its subject)
    job = json.loads(Path(sys.argv[1]).read_text())
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever a check prints goes to stderr; stdout carries only the results
    sandbox = sandboxes.current()
    if sandbox is not None and os.geteuid() == 0:
        sandboxes.set_fs_user(sandbox)  # write into the student's folder with the student's rights only
    workdir = Path(job["workdir"])
    os.chdir(workdir)
    sandboxes.become_subreaper()
    references.REFERENCES.update({gid: tuple(pair) for gid, pair in job.get("references", {}).items()})
    checks = Checks(workdir, job.get("preamble", ""), job.get("answer_cells", []), float(job.get("timeout", 300)),
                    job.get("student_modules", []))
    try:
        for check in job["checks"]:
            first = ("" if checks.prepared or not checks.preamble.strip()
                     else " (first the lesson's given cells it uses)")
            out.write(json.dumps({"started": check["name"] + first}) + "\n")  # the grader says what is running
            out.flush()
            out.write(json.dumps(checks.run(check)) + "\n")
            out.flush()
    finally:
        checks.close()


if __name__ == "__main__":
    main()
