"""The judge: a fresh trusted process that runs each graded check and decides its points.

A check is the master's test cell (visible and hidden parts), run here -- never in the student's
kernel, so nothing the student's cells did to their kernel (input transformers, redefined helpers,
patched ``assert`` machinery) reaches it. When a check imports one of the student's modules it gets a
proxy: every call crosses into a *subject* process (:mod:`crashlab.grading.subject`) that runs as the
sandbox user, and only plain data comes back (see :mod:`crashlab.grading.remote`). The asserts run
here, and the hidden expectations never leave this process.

The grader starts ``python -m crashlab.grading.judge`` with a JSON job on stdin and reads one JSON
result per check from stdout.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import importlib.abc
import importlib.machinery
import inspect
import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from pathlib import Path

from crashlab.plumbing.lazy import lazy_module
from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.plumbing import sandbox as sandboxes
from crashlab.plumbing.process_tree import die_with_parent, exit_when_orphaned
from crashlab.grading import references
from crashlab.grading.answer_cells import load_answer_cells, why_undefined
from crashlab.grading.remote import decode, dumps, encode
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


class StudentCodeError(Exception):
    """Base of the local stand-ins for exceptions the student's code raised."""


class SubjectGone(RuntimeError):
    pass


class Subject:
    """The judge's end of one subject process."""

    def __init__(self, workdir: Path, deadline: float):
        self.workdir = workdir
        self.deadline = deadline
        self.callbacks: dict[int, object] = {}
        self.lock = threading.RLock()
        req_read, self._req = os.pipe()
        self._rep, rep_write = os.pipe()
        env = sandboxes.child_env({k: v for k, v in os.environ.items() if k != "CRASHLAB_PRIVATE_DIR"})
        # The earlier lessons' files that the checks run (as their masters write them; see
        # crashlab.lessons.kernel.extract_lesson_files) are not the student's: the process running the student's code
        # does not see them.
        hidden = [os.environ["CRASHLAB_LESSON_FILES"]] if os.environ.get("CRASHLAB_LESSON_FILES") else []
        self._log = open(workdir / ".crashlab-subject.log", "ab")
        self.process = subprocess.Popen([sys.executable, "-m", "crashlab.grading.subject", str(req_read), str(rep_write)],
                                        cwd=workdir, env=env, pass_fds=(req_read, rep_write), stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=self._log, start_new_session=True,
                                        preexec_fn=die_with_parent(then=sandboxes.preexec(hide_also=tuple(hidden))))
        os.close(req_read)
        os.close(rep_write)
        self._buffer = b""

    # --- values --------------------------------------------------------------------------------------
    def local(self, data: dict):
        tag = data.get("$")
        if tag == "ref":
            return Remote(self, int(data["id"]), str(data.get("type", "object")))
        if tag == "class":
            return exception_class([str(n) for n in data["mro"]])
        raise ValueError(f"the student's process sent an unknown value tag {tag!r}")

    def remote_arg(self, value) -> dict:
        if isinstance(value, Remote):
            return {"$": "ref", "id": value._id}
        if callable(value):
            self.callbacks[id(value)] = value
            return {"$": "callback", "id": id(value)}
        raise TypeError(f"cannot send a {type(value).__name__} to the student's code")

    # --- the protocol ---------------------------------------------------------------------------------
    def request(self, message: dict):
        # The check may have started a world since: the student's code sees the same endpoints.
        message["env"] = {k: v for k, v in os.environ.items()
                          if k in ("CRASHLAB_MODEL_URL", "CRASHLAB_SERVICES_URL", "CRASHLAB_STATE_DIR")}
        with self.lock:
            self._send(message)
            while True:
                reply = self._receive()
                if "callback" in reply:
                    self._answer_callback(reply)
                    continue
                if "error" in reply:
                    raise remote_exception(reply["error"])
                return decode(reply["value"], self.local)

    def _answer_callback(self, message: dict) -> None:
        function = self.callbacks.get(message["callback"])
        try:
            args = decode(message["args"], self.local)
            kwargs = decode(message["kwargs"], self.local)
            result = function(*args, **kwargs)
            self._send({"callback_result": encode(result, self.remote_arg)})
        except Exception as exc:  # noqa: BLE001 -- reported to the subject, which raises it there
            self._send({"callback_error": f"{type(exc).__name__}: {exc}"})

    def _send(self, message: dict) -> None:
        try:
            os.write(self._req, dumps(message))
        except OSError:
            raise SubjectGone("the process running your code is gone") from None

    def _receive(self) -> dict:
        while b"\n" not in self._buffer:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise TimeoutError("your code did not answer before the check's time limit")
            if not select.select([self._rep], [], [], min(remaining, 1.0))[0]:
                continue
            chunk = os.read(self._rep, 1 << 16)
            if not chunk:
                raise SubjectGone("the process running your code exited (or was killed) in the middle of a call")
            self._buffer += chunk
            if len(self._buffer) > 64 << 20:
                self.close()
                raise SubjectGone("your code sent back more than 64 MB")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise SubjectGone("the process running your code sent something that is not JSON") from None

    def close(self) -> None:
        for fd in (self._req, self._rep):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req = self._rep = -1
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self._log.close()


class Remote:
    """An object that lives in the student's process."""

    __slots__ = ("_subject", "_id", "_type")

    def __init__(self, subject: Subject, ref: int, type_name: str):
        object.__setattr__(self, "_subject", subject)
        object.__setattr__(self, "_id", ref)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str):
        return self._subject.request({"op": "getattr", "id": self._id, "name": name})

    def __call__(self, *args, **kwargs):
        return self._subject.request({"op": "call", "id": self._id, "args": encode(list(args), self._subject.remote_arg),
                                      "kwargs": encode(kwargs, self._subject.remote_arg)})

    def __repr__(self) -> str:
        return f"<{self._type} in your code>"


# --- exceptions from the student's process ---------------------------------------------------------------
_classes: dict[str, type] = {}
_SAFE = re.compile(r"[^A-Za-z0-9_]")


def exception_class(mro: list[str]) -> type:
    """A local class for a remote exception class: the real one for builtins and the course library
    (already imported here), a stand-in named like it otherwise."""
    base: type = StudentCodeError
    for name in reversed(mro):  # from the most general class to the most specific
        module, _, qualname = name.rpartition(".")
        known = _trusted_class(module, qualname)
        if known is not None:
            base = known
            continue
        if name not in _classes:
            _classes[name] = type(_SAFE.sub("_", qualname) or "StudentError", (base,), {"__module__": "your code"})
        base = _classes[name]
    return base


def _trusted_class(module: str, qualname: str) -> type | None:
    owner = builtins if module == "builtins" else sys.modules.get(module)
    if owner is None or not (module == "builtins" or module.startswith("crashlab.")):
        return None
    value = owner
    for part in qualname.split("."):
        value = getattr(value, part, None)
    # Only ordinary exceptions: a student's class dressed up as KeyboardInterrupt must not stop the judge.
    return value if isinstance(value, type) and issubclass(value, Exception) else None


def remote_exception(error: dict) -> BaseException:
    cls = exception_class([str(n) for n in error.get("mro", [])])
    exc = cls.__new__(cls)
    BaseException.__init__(exc, str(error.get("message", "")))
    for key, value in (error.get("attrs") or {}).items():
        try:
            setattr(exc, key, value)
        except (AttributeError, TypeError):
            pass
    # The student's words come back bounded (shortened at a word): feedback is no channel to carry files out.
    message = textwrap.shorten(str(error.get("message", "")), width=300, placeholder=" [...]")
    exc.__student__ = error.get("mro", ["?"])[0].rpartition(".")[2] + (f": {message}" if message else "")
    exc.__where__ = error.get("where", "")
    return exc


# --- the student's modules, as proxies ----------------------------------------------------------------------
class StudentModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import keys`` inside a check gives a proxy for the student's ``keys.py``.

    Only the modules the master itself writes (its ``%%writefile`` cells) and the grader's module of answer
    cells are the student's: a file planted beside them under another name (``httpx.py``, ``json.py``) is never
    proxied, so the judge's own imports always get the real library."""

    def __init__(self, workdir: Path, names: frozenset[str] | set[str]):
        self.workdir = workdir
        self.names = frozenset(names)
        self.subject: Subject | None = None
        self.loaded: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        if path is None and name in self.names and (self.workdir / f"{name}.py").is_file():
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if self.subject is None:
            raise SubjectGone("no process is running your code")
        remote = self.subject.request({"op": "import", "name": module.__name__})
        module.__getattr__ = remote.__getattr__  # PEP 562: every other name is looked up remotely
        self.loaded.add(module.__name__)

    def forget(self) -> None:
        """Drop the proxies from ``sys.modules``: the next check imports the student's modules afresh."""
        for name in self.loaded:
            sys.modules.pop(name, None)
        self.loaded.clear()


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
        return (f"your code raised {student}" + (f" ({where})" if where and where not in student else "")
                + in_check)
    hidden = line in hidden_lines(source) if line else True
    message = str(exc).strip()
    if isinstance(exc, AssertionError):
        if message:
            return f"check failed{about}: {message}"
        if not hidden:
            return f"check failed{about}: {source.splitlines()[line - 1].strip()}"
        if requirement:
            return f"a hidden check of requirement {requirement} failed: compare your answer with what the text says"
        return "a hidden check failed (it has no message: compare your answer with every requirement in the text)"
    return cut_at_word(f"{type(exc).__name__}{about}: {message}" if message else
                       f"{type(exc).__name__}{about} (with no message)", 1500)


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
                 student_modules: list[str] = ()):
        self.workdir, self.preamble, self.answer_cells, self.timeout = workdir, preamble, answer_cells, timeout
        self.student_modules = {*student_modules, *(str(cell["module"]) for cell in answer_cells)}
        self.namespace: dict = {"__name__": "__check__", "anthropic": lazy_module("anthropic")}
        # The library the checks use is imported before any finder of the student's is in place. ``anthropic``,
        # loaded on its first use inside a check, still gets the real library: the judge runs with ``-P`` (no folder
        # of the student's on its path), and StudentModules proxies only the master's own module names.
        run_code(BASE_PREAMBLE, "<base>", self.namespace)
        self.prepared = False

    def run(self, check: dict) -> dict:
        finder = StudentModules(self.workdir, self.student_modules)
        finder.subject = subject = Subject(self.workdir, time.monotonic() + self.timeout)
        sys.meta_path.insert(0, finder)
        started = time.monotonic()
        unbound: dict = {}
        try:
            if not self.prepared:
                run_code(self.preamble, "<preamble>", self.namespace)  # the master's own given cells
                self.prepared = True
            # answers written as cells, not files: proxies for the names they define, each cell on its own
            unbound = load_answer_cells(self.answer_cells, self.namespace)
            run_code(check["source"], "<check>", self.namespace)
            result = {"name": check["name"], "passed": True, "feedback": "passed"}
        except BaseException as exc:  # noqa: BLE001 -- any failure is a failed check, with words for why
            if isinstance(exc, KeyboardInterrupt):
                raise
            words = why_undefined(exc, unbound, lambda error: feedback(error, "")) or feedback(exc, check["source"])
            result = {"name": check["name"], "passed": False, "feedback": words}
        finally:
            sys.meta_path.remove(finder)
            finder.forget()
            subject.close()
        result["seconds"] = round(time.monotonic() - started, 2)
        return result

    def close(self) -> None:
        from crashlab.lessons.kernel import stop_worlds

        stop_worlds()
        if "__loop__" in self.namespace:
            self.namespace["__loop__"].close()
        sandboxes.kill_descendants()  # servers and launchers the given cells started


def main() -> None:
    exit_when_orphaned()  # a grader killed by SIGKILL takes its judge along (and the judge its subject)
    job = json.loads(sys.stdin.read())
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
            out.write(json.dumps(checks.run(check)) + "\n")
            out.flush()
    finally:
        checks.close()


if __name__ == "__main__":
    main()
