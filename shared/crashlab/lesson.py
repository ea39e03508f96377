"""Small helpers the lesson notebooks share, so no notebook carries a copy of another's plumbing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crashlab.harness import ProcessRun
from crashlab.world import World

_worlds: list[World] = []


def fresh_world(name: str, root: str | os.PathLike = ".crashlab") -> World:
    """Stop the world this helper started last, and start a fresh one in ``root/name``.

    Each scene of a lesson gets a clean world, so its audit shows only that scene.
    """
    stop_worlds()
    world = World.start(Path(root) / name)
    _worlds.append(world)
    return world


def stop_worlds() -> None:
    while _worlds:
        _worlds.pop().stop()


def show_run(run: ProcessRun, label: str = "") -> None:
    """What one agent process printed, and how it ended."""
    how = ("killed by SIGKILL" if run.killed else "timed out" if run.timed_out else f"exit code {run.returncode}")
    print(f"--- {label or 'process'}: {how} ---")
    for line in run.stdout.strip().splitlines():
        print(line)
    for line in run.stderr.strip().splitlines():
        if line.startswith("[crashlab]") or line.startswith("error:"):
            print(line)
        elif "Error" in line and not line.startswith(" "):
            print(f"stderr: {line}")


def show_log(path: str | os.PathLike, width: int = 110) -> None:
    """Print an event log one record per line, shortened, with the torn tail marked."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    if not data:
        print(f"{Path(path).name}: empty")
        return
    lines = data.split(b"\n")
    print(f"{Path(path).name}: {len(lines) - 1} complete line(s)")
    for number, raw in enumerate(lines[:-1], start=1):
        text = raw.decode("utf-8", errors="replace")
        try:
            record = json.loads(text)
            kind = record.get("type", "step") if isinstance(record, dict) else type(record).__name__
            text = f"[{kind}] " + text
        except json.JSONDecodeError:
            text = "[unreadable] " + text
        print(f"{number:3}: {text[:width]}{'…' if len(text) > width else ''}")
    if lines[-1]:
        print(f"torn tail ({len(lines[-1])} bytes, no newline): {lines[-1][:60]!r}")
