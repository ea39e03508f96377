"""The files a command writes when its run ends (``--json``, ``--csv``, the grading bundle) replace only their own.

An output's name is easy to get wrong -- ``--json solutions/02_idempotent_tools.ipynb``, ``--csv`` onto a
submitted notebook -- and what lies there may be a master, a submission or anything else of the user's. So the
rule is one for every output: a command writes a new file, or replaces a file of the same kind, which an earlier
run wrote and which is recognised by its content (a results file by its scores and tests, a gradebook by its
header, a bundle by its entries); anything else is refused with one line, unless the user passes ``--force``.
The commands check before their work starts (nothing is wasted) and again at the write, which is atomic: a
reader sees the old file or the whole new one.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from crashlab.errors import CrashlabError
from crashlab.plumbing.diskfull import disk_full, full_disk_message

_MOST = 64 << 20  # bytes read to recognise a file: none of ours is larger, so a larger one is not ours


class OutputError(CrashlabError, ValueError):
    """The output would replace a file the command did not write; the message says what to do."""


@dataclass(frozen=True)
class Kind:
    """A kind of output: what the messages call it, and how a file of that kind is recognised."""

    name: str
    recognise: Callable[[Path], bool]


def _json(path: Path):
    try:
        if path.stat().st_size > _MOST:
            return None
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _json_object_with(*keys: str) -> Callable[[Path], bool]:
    def recognise(path: Path) -> bool:
        value = _json(path)
        return isinstance(value, dict) and set(keys) <= set(value)
    return recognise


def _json_list_of(*keys: str) -> Callable[[Path], bool]:
    def recognise(path: Path) -> bool:
        value = _json(path)
        return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and set(keys) <= set(v)
                                                               for v in value)
    return recognise


def _gradebook(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            header = f.readline(1 << 20).rstrip("\r\n")
    except (OSError, ValueError):
        return False
    return header.startswith("student,") and header.endswith(",total,max,notes")


def _bundle(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return {"setup.sh", "run_autograder"} <= set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _head(path: Path, size: int) -> bytes | None:
    """The first ``size`` bytes of a file, or None for one that cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return None


def _encrypted(path: Path) -> bool:
    head = _head(path, 8)
    return head == b"Salted__"  # what `openssl enc -salt` begins its output with


def _report_page(path: Path) -> bool:
    head = _head(path, 256)
    return head is not None and head.startswith(REPORT_HEAD.encode())


def _plot(path: Path) -> bool:
    head = _head(path, 1024)
    return head is not None and (head.startswith((b"\x89PNG", b"%PDF"))
                                 or (head.lstrip().startswith(b"<?xml") and b"<svg" in head))


RESULTS = Kind("a results file", _json_object_with("score", "max_score", "tests"))
MATRIX = Kind("a crash-test matrix", _json_object_with("agent", "order_id", "expect", "rows"))
SOAK = Kind("a soak summary", _json_object_with("agent", "settings", "per_order"))
DEMO = Kind("the demo's matrices", _json_list_of("lesson", "title", "rows"))
THROUGHPUT = Kind("grading-throughput figures", _json_object_with("lesson", "submissions", "jobs", "runs"))
BENCH = Kind("benchmark results", _json_object_with("steps", "repeats", "engines", "rows"))
PLOT = Kind("a plot", _plot)
REPORT_HEAD = ("<!doctype html><html lang='en'><meta charset='utf-8'>"  # how crashlab.report's pages begin
               "<meta name='viewport' content='width=device-width, initial-scale=1'>")
REPORT = Kind("a crash-matrix report page", _report_page)
GRADEBOOK = Kind("a gradebook", _gradebook)
BUNDLE = Kind("a grading bundle", _bundle)
ENCRYPTED_BUNDLE = Kind("an encrypted grading bundle", _encrypted)


def _what(path: Path) -> str:
    value = _json(path)
    if isinstance(value, dict) and "cells" in value and "nbformat" in value:
        return "a notebook"
    return "a file"


def check_replaceable(path: str | os.PathLike, kind: Kind, *, force: bool = False) -> None:
    """OutputError unless ``path`` may be written as ``kind``: it does not exist, it is ``kind`` (an earlier
    run's), or ``force``. A folder is never replaced."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path} is a folder: give a file name")
    if force or not (path.exists() or path.is_symlink()) or kind.recognise(path):
        return
    raise OutputError(f"{path} exists and is {_what(path)}, not {kind.name} this command wrote: it is never "
                      f"replaced; give a new file name (or --force to replace it)")


def replace_with(made: str | os.PathLike, target: str | os.PathLike, kind: Kind, *, force: bool = False) -> None:
    """Move the finished file ``made`` (in ``target``'s folder) over ``target``, checked once more first;
    ``made`` is removed if it may not be."""
    try:
        check_replaceable(target, kind, force=force)
    except OutputError:
        Path(made).unlink(missing_ok=True)
        raise
    os.replace(made, target)  # a symlink at target is replaced, never written through


def write_output(target: str | os.PathLike, data: str | bytes, kind: Kind, *, force: bool = False,
                 mode: int = 0o644) -> None:
    """Write ``data`` to ``target`` atomically, replacing only a file of ``kind`` (or anything, with ``force``)."""
    check_replaceable(target, kind, force=force)
    try:
        fd, made = tempfile.mkstemp(prefix=".crashlab-", dir=Path(target).absolute().parent)
    except OSError as exc:
        if disk_full(exc):
            raise OutputError(full_disk_message(f"cannot write {target}", exc)) from None
        raise
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())  # a full disk may say so only here: never a short file taken for a whole one
        os.chmod(made, mode)
        replace_with(made, target, kind, force=force)
    except BaseException as exc:
        Path(made).unlink(missing_ok=True)
        if disk_full(exc):
            raise OutputError(full_disk_message(f"cannot write {target}", exc)) from None
        raise
