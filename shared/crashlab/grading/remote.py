"""Calling a student's code across a process boundary, getting plain data back.

The trusted side (the judge, see :mod:`crashlab.grading.judge`) imports a student module as a proxy;
every attribute read and call goes to the *subject*, a separate process that runs as the sandbox user
and really imports the student's file. What comes back is JSON: plain values, or a reference to an
object that stayed in the subject, or an exception described by its class names and message. Nothing
the subject sends is ever unpickled or executed by the judge, so a student's code can choose what its
functions return -- as any answer can -- but cannot change how the judge compares it.

The encoding tags every non-JSON value: ``{"$": "tuple", "v": [...]}``, ``{"$": "dict", "v": [[k, v],
...]}``, ``{"$": "path", "v": "..."}``, ``{"$": "ref", "id": 3, "type": "SqliteLedger"}``,
``{"$": "class", "mro": [...]}``, ``{"$": "record", "type": "ProcessRun", "v": {...}}`` (a dataclass,
which arrives as an object with the same attributes: its fields and the values of its properties, such as
``ProcessRun.killed``, which the notebooks show the learner reading like fields) and, from the judge only,
``{"$": "callback", "id": 1}`` (a function of the judge's that the subject may call back, with plain data).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import PurePath
from types import SimpleNamespace

PRIMITIVES = (str, int, float, bool, type(None))
MAX_DEPTH = 64  # containers inside containers; deeper ones cross as references


def encode(value, refs, within: tuple[int, ...] = ()) -> object:
    """``refs(value) -> dict`` makes a reference for anything that is not plain data. ``within``: the containers
    being encoded around this value, so one that holds itself -- or a property that makes a new record on every
    read, without end -- becomes a reference, not a loop."""
    if isinstance(value, (list, tuple, dict)) or dataclasses.is_dataclass(value):
        if id(value) in within or len(within) >= MAX_DEPTH:
            return refs(value)
        within = (*within, id(value))
    if isinstance(value, bool) or value is None or type(value) in (str, int, float):
        return value
    if type(value) is list:
        return [encode(v, refs, within) for v in value]
    if type(value) is tuple:
        return {"$": "tuple", "v": [encode(v, refs, within) for v in value]}
    if type(value) is dict:
        return {"$": "dict", "v": [[encode(k, refs, within), encode(v, refs, within)] for k, v in value.items()]}
    if isinstance(value, PurePath):
        return {"$": "path", "v": str(value)}
    if type(value) is bytes:
        return {"$": "bytes", "v": value.decode("latin-1")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"$": "record", "type": type(value).__name__,
                "v": {name: encode(v, refs, within) for name, v in record_attributes(value).items()}}
    return refs(value)


def record_attributes(value) -> dict[str, object]:
    """A dataclass's fields, then the values of its public properties (a property that raises is left out,
    as reading it would fail)."""
    attributes = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    for cls in type(value).__mro__:
        for name, attribute in vars(cls).items():
            if (isinstance(attribute, (property, functools.cached_property)) and not name.startswith("_")
                    and name not in attributes):
                try:
                    attributes[name] = getattr(value, name)
                except Exception:  # noqa: BLE001 -- the attribute is as missing on the other side as it is here
                    continue
    return attributes


def decode(data, resolve) -> object:
    """``resolve(tagged dict) -> object`` turns a reference or a callback into a local object."""
    if isinstance(data, list):
        return [decode(v, resolve) for v in data]
    if not isinstance(data, dict):
        if not isinstance(data, PRIMITIVES):
            raise ValueError(f"not plain data: {type(data).__name__}")
        return data
    tag = data.get("$")
    if tag == "tuple":
        return tuple(decode(v, resolve) for v in data["v"])
    if tag == "dict":
        return {_hashable(decode(k, resolve)): decode(v, resolve) for k, v in data["v"]}
    if tag == "path":
        from pathlib import Path

        return Path(str(data["v"]))
    if tag == "bytes":
        return str(data["v"]).encode("latin-1")
    if tag == "record":
        return SimpleNamespace(**{str(k): decode(v, resolve) for k, v in dict(data["v"]).items()})
    return resolve(data)


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def dumps(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()
