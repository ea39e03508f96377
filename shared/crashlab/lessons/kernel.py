"""Small helpers the lesson notebooks share, so no notebook carries a copy of another's plumbing (a lesson's scene
worlds are :mod:`crashlab.world.scenes`', which the grader's judge stops too)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crashlab.harness import ProcessRun
from crashlab.plumbing.lines import fit
from crashlab.world.scenes import fresh_world, stop_worlds

__all__ = ["extract_lesson_files", "fresh_world", "say", "show_log", "show_run", "stop_worlds"]


def say(*parts: object) -> None:
    """``print(*parts)``, with a line too wide for the notebook wrapped at words (lines after the first indented):
    a long list or sentence then reads as a paragraph rather than breaking mid-word at the output area's edge."""
    print(fit(" ".join(str(part) for part in parts)))


def show_run(run: ProcessRun, label: str = "") -> None:
    """What one agent process printed, and how it ended."""
    how = ("killed by SIGKILL" if run.killed else "timed out" if run.timed_out else f"exit code {run.returncode}")
    print(f"--- {label or 'process'}: {how} ---")
    for line in run.stdout.strip().splitlines():
        print(fit(line))  # a long line wraps at words here, not mid-word at the notebook's edge
    for line in run.stderr.strip().splitlines():
        if line.startswith("[crashlab]") or line.startswith("error:"):
            print(fit(line))
        elif "Error" in line and not line.startswith(" "):
            print(fit(f"stderr: {line}"))


def _summary(record) -> str:
    """One short line for a log record: its type, the tool it decided on, the effect it recorded."""
    if not isinstance(record, dict):
        return f"[{type(record).__name__}]"
    tools, effects, texts = [], [], []

    def walk(value):
        if isinstance(value, dict):
            if value.get("type") == "tool_use":
                tools.append(value.get("name"))
            if "object" in value and "status" in value:
                effects.append(f"{value['object']} {value['status']}")
            if value.get("type") == "tool_result" and isinstance(value.get("content"), str):
                try:
                    walk(json.loads(value["content"]))
                except json.JSONDecodeError:
                    pass
            if value.get("type") == "text" and not tools:
                texts.append(value.get("text", ""))
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(record)
    parts = [f"[{record.get('type', 'step')}]"]
    if tools:
        parts.append("decided " + ", ".join(tools))
    if effects:
        parts.append("result: " + ", ".join(effects))
    if not tools and not effects and texts:
        parts.append(repr(texts[0][:60]))
    return " ".join(parts)


def show_log(path: str | os.PathLike) -> None:
    """Print an event log one record per line, summarised, with a torn tail or damage marked."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    if not data:
        print(f"{Path(path).name}: empty")
        return
    lines = data.split(b"\n")
    print(f"{Path(path).name}: {len(lines) - 1} complete line(s)")
    for number, raw in enumerate(lines[:-1], start=1):
        try:
            text = _summary(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError):
            text = f"[unreadable] {raw[:40]!r}"
        print(f"{number:3}: {text}")
    if lines[-1]:
        print(f"torn tail ({len(lines[-1])} bytes, no newline): {lines[-1][:40]!r}")


def extract_lesson_files(lessons, dest: str | os.PathLike) -> Path:
    """Write the ``%%writefile`` files of the given lessons' masters (e.g. ``["01", "02"]``) into
    ``dest``, so a later lesson can run an earlier lesson's agents exactly as they were taught; returns the
    folder the files are in (while grading, a folder of the grader's choosing instead of ``dest``)."""
    import nbformat

    from crashlab.course.notebooks import lesson_of, repo_root, written_files
    from crashlab.plumbing.sandbox import ENV_GRADING_LESSON

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    wanted = set(lessons)
    graded = os.environ.get(ENV_GRADING_LESSON)
    if graded and any(lesson >= graded for lesson in wanted):
        raise PermissionError(f"lesson {graded} is being graded: its answers (and later ones') are not yours to copy")
    given = os.environ.get("CRASHLAB_LESSON_FILES")  # while grading, the masters are out of reach: the
    if given:                                         # grader hands over the earlier lessons' files
        # ... to the checks alone: the copy goes beside them, where the student's code is not let see, not to dest
        dest = Path(given) / ("lessons-" + "-".join(sorted(wanted)))
        dest.mkdir(exist_ok=True)
        for lesson in sorted(wanted):
            for source in sorted((Path(given) / lesson).glob("*")):
                (dest / source.name).write_text(source.read_text())
        return dest.resolve()
    for master in sorted((repo_root() / "solutions").glob("*.ipynb")):
        nb = nbformat.read(master, as_version=4)
        if lesson_of(nb) in wanted:
            wanted.discard(lesson_of(nb))
            for name, source in written_files(nb).items():
                (dest / name).write_text(source)
    if wanted:
        raise FileNotFoundError(f"no master notebook for lesson(s) {sorted(wanted)}")
    return dest.resolve()
