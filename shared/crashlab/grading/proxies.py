"""The judge's end of the student's process: the subject process that runs the student's code as the sandbox user,
the proxies through which a check calls into it (:class:`Remote`, and :class:`StudentModules`, which makes a
check's ``import keys`` a proxy for the student's ``keys.py``), and the local classes for the exceptions it raises.

Only plain data crosses (:mod:`crashlab.grading.remote`); the judge (:mod:`crashlab.grading.judge`) keeps the
asserts and the hidden expectations on its side.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
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
from pathlib import Path
from typing import Any

from crashlab.engines.registry import student_env
from crashlab.errors import CrashlabError
from crashlab.plumbing import sandbox as sandboxes
from crashlab.plumbing.process_tree import die_with_parent
from crashlab.grading.remote import decode, dumps, encode


class StudentCodeError(Exception):
    """Base of the local stand-ins for exceptions the student's code raised."""


class SubjectGone(CrashlabError, RuntimeError):
    pass


class Subject:
    """The judge's end of one subject process."""

    def __init__(self, workdir: Path, deadline: float, log: int | None = None, offline: bool = False):
        """``log``: where the student's code prints (a file descriptor; nowhere by default). ``offline``: in a
        network namespace with nothing in it -- while a check runs on the reference answers, the student's own code
        reaches none of its worlds."""
        self.workdir = workdir
        self.deadline = deadline
        self.callbacks: dict[int, Any] = {}
        self.lock = threading.RLock()
        req_read, self._req = os.pipe()
        self._rep, rep_write = os.pipe()
        private = ("CRASHLAB_PRIVATE_DIR", "CRASHLAB_REFERENCE_DIR")
        env = sandboxes.child_env({k: v for k, v in os.environ.items() if k not in private}, engines=student_env(),
                                  student=True)
        # The earlier lessons' files that the checks run (as their masters write them; see
        # crashlab.lessons.kernel.extract_lesson_files) are not the student's: the process running the student's code
        # does not see them.
        hidden = [os.environ["CRASHLAB_LESSON_FILES"]] if os.environ.get("CRASHLAB_LESSON_FILES") else []
        output = log if log is not None else subprocess.DEVNULL
        demote = sandboxes.preexec(hide_also=tuple(hidden), student=True, network=True if offline else None)
        self.process = subprocess.Popen([sys.executable, "-m", "crashlab.grading.subject", str(req_read), str(rep_write)],
                                        cwd=workdir, env=env, pass_fds=(req_read, rep_write), stdin=subprocess.DEVNULL,
                                        stdout=output, stderr=output, start_new_session=True,
                                        preexec_fn=die_with_parent(then=demote))
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
        function: Any = self.callbacks.get(message["callback"])  # None: the call fails, and the subject is told
        try:
            args: Any = decode(message["args"], self.local)
            kwargs: Any = decode(message["kwargs"], self.local)
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


def exception_class(mro: list[str]) -> type[BaseException]:
    """A local class for a remote exception class: the real one for builtins and the course library
    (already imported here), a stand-in named like it otherwise."""
    base: type[BaseException] = StudentCodeError
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
    owner: Any = builtins if module == "builtins" else sys.modules.get(module)
    if owner is None or not (module == "builtins" or module.startswith("crashlab.")):
        return None
    value = owner
    for part in qualname.split("."):
        value = getattr(value, part, None)
    # Only ordinary exceptions: a student's class dressed up as KeyboardInterrupt must not stop the judge.
    return value if isinstance(value, type) and issubclass(value, Exception) else None


def remote_exception(error: dict) -> BaseException:
    cls = exception_class([str(n) for n in error.get("mro", [])])
    exc: Any = cls.__new__(cls)  # given the student's words and where, below, for the feedback
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

    def __init__(self, workdir: Path, names: frozenset[str] | set[str], start=None):
        """``start``: makes the :class:`Subject` on the first import of a student's module (a check that imports
        none starts no process)."""
        self.workdir = workdir
        self.names = frozenset(names)
        self.subject: Subject | None = None
        self.start = start
        self.loaded: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        if path is None and name in self.names and (self.workdir / f"{name}.py").is_file():
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if self.subject is None and self.start is not None:
            self.subject = self.start()
        if self.subject is None:
            raise SubjectGone("no process is running your code")
        remote = self.subject.request({"op": "import", "name": module.__name__})
        module.__getattr__ = remote.__getattr__  # PEP 562: every other name is looked up remotely
        self.loaded.add(module.__name__)

    def forget(self) -> None:
        """Drop the proxies from ``sys.modules``: the next check imports the student's modules afresh. The subject
        process, if one was started, ends."""
        for name in self.loaded:
            sys.modules.pop(name, None)
        self.loaded.clear()
        if self.subject is not None:
            self.subject.close()
            self.subject = None
