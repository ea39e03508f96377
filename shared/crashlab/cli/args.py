"""Checks of the ``crashlab`` command's arguments, made before any work starts.

Each check is an argparse ``type=`` function (so ``--help`` and the error name the option) that turns
a bad value into one line saying what is wrong and what to do; :class:`Parser` prints that line as
``error: ...`` with exit code 2, as argparse does for any usage error, instead of a usage block.
Checks that need two options at once raise :class:`UsageError` from the command before it does anything.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import math
import os
import re
import socket
import sys
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.crash_points import FORMS_WITH_UNDO, check_crash_point
from crashlab.order import TOOL_ORDER, check_failure, check_order_id

CRASH_POINT_FORMS = FORMS_WITH_UNDO
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


class UsageError(CrashlabError, ValueError):
    """Options that are each fine but do not go together; the message says what to do."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, ``error: WHAT (see `PROG --help`)``, exit 2.
    Sub-commands made with ``add_subparsers`` are Parsers too."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def _bad(message: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(message)


# --- numbers -----------------------------------------------------------------------------------------------
def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _bad(f"expected a whole number, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise _bad(f"must be at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise _bad(f"must be 0 or more, got {text!r}")
    return value


# Processes (or gradings) a command runs at once: each is an interpreter of its own, so a --jobs of a thousand would
# start a thousand and take the machine down with it. More than this many at once is refused.
MAX_JOBS = 16


def _at_most(text: str, most: int, what: str, why: str = "") -> int:
    """A whole number from 1 to ``most``; past it, one line: ``at most MOST WHAT, got TEXT: WHY``."""
    value = positive_int(text)
    if value > most:
        raise _bad(f"at most {most}{what}, got {text!r}{why}")
    return value


def jobs(text: str) -> int:
    return _at_most(text, MAX_JOBS, " at once", ": each is a process of its own (2 to 4 suit 2 cores)")


def soak_orders(text: str) -> int:
    from crashlab.soak import MAX_ORDERS

    return _at_most(text, MAX_ORDERS, f" orders (ORD-SOAK-0001 to ORD-SOAK-{MAX_ORDERS})")


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _bad(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise _bad(f"must be a positive, finite number of seconds, got {text!r}")
    return value


def state_folder(text: str) -> str:
    """A world's state folder. An empty name is refused: the world would live in a scratch folder of its own,
    and a detached one would be left running with no folder to name when stopping it."""
    if not text.strip():
        raise _bad("needs a folder name: the world keeps its ledgers and the agents' state there")
    return text


def resumer_count(text: str) -> int:
    from crashlab.harness import MAX_RESUMERS

    return _at_most(text, MAX_RESUMERS, " resumers at once", ": a race needs two or three")


def port(text: str) -> int:
    value = _whole_number(text)
    if not 1 <= value <= 65535:
        raise _bad(f"a port is between 1 and 65535, got {text!r} (leave --port out for any free port)")
    return value


def check_port_free(number: int, host: str = "127.0.0.1") -> None:
    """UsageError unless a server could listen on ``host:number`` now (in use, or privileged)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the world's server does
        try:
            probe.bind((host, number))
        except OSError as exc:
            raise UsageError(f"--port {number}: cannot listen on {host}:{number} ({exc.strerror}); "
                             "choose another port or leave --port out") from None


# --- files -------------------------------------------------------------------------------------------------
def existing_file(text: str) -> str:
    path = Path(text)
    if not text or not path.exists():
        raise _bad(f"no such file: {text!r}")
    if not path.is_file():
        raise _bad(f"{text} is not a file")
    if not os.access(path, os.R_OK):
        raise _bad(f"cannot read {text} (permission denied)")
    return text


def agent_file(text: str) -> str:
    """A Python file that compiles: a notebook or a file with a syntax error is refused before any world starts."""
    existing_file(text)
    if text.endswith(".ipynb"):
        raise _bad(f"{text} is a notebook: give the agent file that its %%writefile cell writes")
    try:
        compile(Path(text).read_bytes(), text, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise _bad(f"{text} is not valid Python ({exc.msg}, line {exc.lineno}): fix it first") from None
    except ValueError as exc:  # null bytes, say
        raise _bad(f"{text} is not a Python source file ({exc})") from None
    return text


def notebook_file(text: str) -> str:
    existing_file(text)
    import nbformat

    try:
        nbformat.read(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for a file that is not a notebook
        raise _bad(f"{text} is not a Jupyter notebook ({type(exc).__name__})") from None
    return text


def output_file(text: str) -> str:
    """A file this command may write at the end of its run: its folder exists and is writable."""
    if not text:
        raise _bad("an empty file name")
    path = Path(text)
    folder = path.resolve().parent
    if path.is_dir():
        raise _bad(f"{text} is a folder: give a file name")
    if not folder.is_dir():
        raise _bad(f"the folder {folder} does not exist: create it first")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise _bad(f"cannot write {text} (permission denied)")
    return text


def plot_file(text: str) -> str:
    output_file(text)
    if Path(text).suffix.lower() not in PLOT_SUFFIXES:
        raise _bad(f"{text}: a plot is saved as {', '.join(PLOT_SUFFIXES)}; end the name with one of them")
    return text


def output_folder(text: str) -> str:
    """A folder to keep files in: an existing writable folder, or one that can be made."""
    if not text:
        raise _bad("an empty folder name")
    path = Path(text).resolve()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise _bad(f"{existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise _bad(f"cannot write in {existing} (permission denied)")
    return text


def check_results_dir(results_dir: str, submissions: str, csv: str | None) -> None:
    """``grade-batch``: UsageError, before any grading, when the results would land among the submissions (each
    folder there is read as a student's, so the results folder would be graded as one more) or the gradebook would
    be written over the results folder."""
    results, folder = Path(results_dir).resolve(), Path(submissions).resolve()
    if results == folder or results.is_relative_to(folder):
        raise UsageError(f"--results-dir {results_dir} is inside the submissions folder {submissions}, where every "
                         "folder is a student's: give a folder outside it")
    if csv and Path(csv).resolve() == results:
        raise UsageError(f"--csv {csv} is the results folder itself: give the gradebook a file name of its own")


def lesson_number(text: str) -> str:
    """Two digits naming one of the course's lessons (``--answers-through 04``); one line for any other."""
    import nbformat

    from crashlab.course.notebooks import lesson_of, repo_root

    if not re.fullmatch(r"\d\d", text):
        raise _bad(f"{text!r} is not a lesson number: give two digits, such as 01")
    available = sorted(filter(None, (lesson_of(nbformat.read(m, as_version=4))
                                     for m in (repo_root() / "solutions").glob("*.ipynb"))))
    if available and text not in available:
        raise _bad(f"there is no lesson {text}: the lessons are {available[0]} to {available[-1]}")
    return text


def check_not_same_file(output: str | None, source: str, what: str) -> None:
    """UsageError if writing ``output`` would overwrite ``source``."""
    if output and Path(output).resolve() == Path(source).resolve():
        raise UsageError(f"--json {output} is the {what} itself: writing it would overwrite it; give another file")


def check_output(path: str | None, kind, force: bool) -> None:
    """UsageError if writing the output ``path`` would replace a file that is not an earlier output of ``kind``
    (see :mod:`crashlab.plumbing.outputs`); checked before the command starts its work."""
    from crashlab.plumbing.outputs import OutputError, check_replaceable

    if path:
        try:
            check_replaceable(path, kind, force=force)
        except OutputError as exc:
            raise UsageError(str(exc)) from None


def force_option(parser: argparse.ArgumentParser) -> None:
    """``--force``, alike on every command that writes an output file."""
    parser.add_argument("--force", action="store_true",
                        help="replace the output file even when it is not one this command wrote")


def check_folder_writable(folder: str | os.PathLike, why: str) -> None:
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write in {Path(folder).resolve()} ({why}): run it from a folder you can write")


# --- names the library knows -------------------------------------------------------------------------------
def _unknown(kind: str, name: str, known) -> argparse.ArgumentTypeError:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return _bad(f"unknown {kind} {name!r}: {hint}choose from {', '.join(known)}")


def tool_name(text: str) -> str:
    if text not in TOOL_ORDER:
        raise _unknown("tool", text, TOOL_ORDER)
    return text


def crash_point(text: str) -> str:
    try:
        return check_crash_point(text)
    except ValueError as exc:
        raise _bad(str(exc)) from None


def crash_points(text: str) -> str | list[str]:
    """``all``, or a comma-separated list of distinct crash points."""
    if text.strip() == "all":
        return "all"
    points = [crash_point(p) for p in text.split(",") if p.strip()]
    if not points:
        raise _bad("no crash points given: use 'all' or a list such as after:charge_card,before:model#2")
    repeated = sorted({p for p in points if points.count(p) > 1})
    if repeated:
        raise _bad(f"{', '.join(repeated)} given more than once")
    return points


def failure(text: str) -> str:
    """A step that fails for good: ``TOOL``, ``TOOL:REASON`` or ``REASON`` (see :func:`crashlab.order.check_failure`)."""
    try:
        return "{}:{}".format(*check_failure(text))
    except ValueError as exc:
        raise _bad(str(exc)) from None


def failure_or_none(text: str) -> str:
    """:func:`failure`, or ``none``: no step fails (a reference saga soaked down its order's own path)."""
    return "none" if text.strip() == "none" else failure(text)


def env_setting(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> (NAME, VALUE), NAME a variable name; one line for anything else."""
    name, equals, value = text.partition("=")
    if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise _bad(f"expected NAME=VALUE, such as SAGA_PATIENCE_S=3, got {text!r}")
    return name, value


def order_id(text: str) -> str:
    try:
        return check_order_id(text)
    except ValueError as exc:
        raise _bad(str(exc)) from None


def module_name(text: str) -> str:
    """A module the warm launcher can import: it runs without the current folder on its path (``python -P``)."""
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", text):
        raise _bad(f"{text!r} is not a module name such as langgraph.graph")
    saved = sys.path[:]
    if not sys.flags.safe_path:
        sys.path[:] = sys.path[1:]  # the script's folder (or the current one with -m), which -P leaves out
    try:
        found = importlib.util.find_spec(text) is not None
    except Exception:  # a missing or failing parent package
        found = False
    finally:
        sys.path[:] = saved
    if not found:
        raise _bad(f"no module named {text!r} in this environment: install it, or check the name")
    return text


def names_from(known, kind: str):
    """A ``type=`` for a comma-separated list of names, each one of ``known``."""
    def names(text: str) -> list[str]:
        chosen = [name.strip() for name in text.split(",") if name.strip()]
        if not chosen:
            raise _bad(f"no {kind}s given: choose from {', '.join(known)}")
        for name in chosen:
            if name not in known:
                raise _unknown(kind, name, known)
        return list(dict.fromkeys(chosen))
    names.__name__ = f"{kind}_names"
    return names


def grading_options(parser: argparse.ArgumentParser, deadline_for: str) -> None:
    """The options every grading command takes (``grade``, ``grade-batch``), alike everywhere."""
    parser.add_argument("--timeout", type=positive_int, default=120, help="seconds per cell (default %(default)s)")
    parser.add_argument("--deadline", type=positive_seconds, default=900,
                        help=f"seconds for {deadline_for} (default %(default)s)")
    parser.add_argument("--no-isolate", action="store_true", help="run student code as yourself even when root")


def lesson_range(text: str) -> list[str]:
    """``--lessons``: ``03``, ``01-03`` or ``01,04`` -> the ids of the course's lessons in it."""
    import nbformat

    from crashlab.grading.classroom import parse_lessons
    from crashlab.course.notebooks import lesson_of, repo_root

    available = sorted(filter(None, (lesson_of(nbformat.read(m, as_version=4))
                                     for m in (repo_root() / "solutions").glob("*.ipynb"))))
    try:
        return parse_lessons(text, available)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
