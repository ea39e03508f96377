"""The untrusted end of a check: imports the student's modules and runs the calls the judge asks for.

Run by the judge as ``python -m crashlab.grading.subject REQ_FD REP_FD`` in the student's folder, as
the sandbox user while grading as root. It speaks JSON lines on two pipes of its own; the student's
code may print what it likes to stdout and stderr, which go to a file, never to the judge.
"""

from __future__ import annotations

from typing import Any

import importlib
import json
import os
import sys
import threading
import traceback

from crashlab.grading.remote import decode, encode
from crashlab.plumbing.tracebacks import is_students_file


class Subject:
    def __init__(self, requests, replies):
        self.requests, self.replies = requests, replies
        self.objects: dict[int, Any] = {}
        self.lock = threading.RLock()

    # --- values --------------------------------------------------------------------------------------
    def ref(self, value) -> dict:
        if isinstance(value, type) and issubclass(value, BaseException):
            return {"$": "class", "mro": class_names(value)}
        self.objects[id(value)] = value
        return {"$": "ref", "id": id(value), "type": type(value).__name__, "callable": callable(value)}

    def resolve(self, data: dict):
        if data.get("$") == "ref":
            return self.objects[data["id"]]
        if data.get("$") == "callback":
            return self.callback(data["id"])
        raise ValueError(f"unknown value tag {data.get('$')!r}")

    def callback(self, number: int):
        def call_the_judge(*args, **kwargs):
            with self.lock:
                self.send({"callback": number, "args": encode(list(args), self.ref),
                           "kwargs": encode(kwargs, self.ref)})
                while True:  # the judge may call us again before it answers
                    message = self.receive()
                    if message is None:
                        os._exit(3)
                    if "callback_result" in message:
                        return decode(message["callback_result"], self.resolve)
                    if "callback_error" in message:
                        raise RuntimeError(f"the check's own callback failed: {message['callback_error']}")
                    self.handle(message)
        return call_the_judge

    # --- the protocol ---------------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        self.replies.write(json.dumps(message) + "\n")
        self.replies.flush()

    def receive(self) -> dict | None:
        line = self.requests.readline()
        return json.loads(line) if line else None

    def handle(self, message: dict) -> None:
        try:
            os.environ.update(message.get("env") or {})
            op = message["op"]
            if op == "import":
                name = message["name"]
                module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
                value = module
            elif op == "getattr":
                value = getattr(self.objects[message["id"]], message["name"])
            elif op == "call":
                target = self.objects[message["id"]]
                args: Any = decode(message["args"], self.resolve)
                kwargs: Any = decode(message["kwargs"], self.resolve)
                value = target(*args, **kwargs)
            else:
                raise ValueError(f"unknown op {op!r}")
            reply = {"value": encode(value, self.ref)}
        except BaseException as exc:  # the student's code failed: describe it as data
            if isinstance(exc, (KeyboardInterrupt,)):
                raise
            reply = {"error": describe(exc)}
        self.send(reply)

    def serve(self) -> None:
        while True:
            message = self.receive()
            if message is None:
                return
            self.handle(message)


def class_names(cls: type) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__ if c is not object]


def students_frames(frames) -> list:
    """The frames of the student's own code (see :mod:`crashlab.plumbing.tracebacks`)."""
    return [f for f in frames if is_students_file(f.filename)]


def describe(exc: BaseException) -> dict:
    attrs = {}
    for key, value in vars(exc).items() if hasattr(exc, "__dict__") else ():
        if not key.startswith("_") and isinstance(value, (str, int, float, bool, type(None))):
            attrs[key] = value
    frames = students_frames(traceback.extract_tb(exc.__traceback__))
    if isinstance(exc, SyntaxError) and exc.lineno:  # where the code does not parse, not the import that found it
        where = f"{os.path.basename(exc.filename or '?')}, line {exc.lineno}"
    else:
        where = f"{os.path.basename(frames[-1].filename)}, line {frames[-1].lineno}" if frames else ""
    return {"mro": class_names(type(exc)), "message": str(exc)[:2000], "attrs": attrs, "where": where}


def main() -> None:
    req_fd, rep_fd = int(sys.argv[1]), int(sys.argv[2])
    requests = os.fdopen(req_fd, "r")
    replies = os.fdopen(rep_fd, "w")
    sys.path.insert(0, os.getcwd())
    Subject(requests, replies).serve()


if __name__ == "__main__":
    main()
