"""A lesson's reference agent for the soak (``crashlab soak --reference 05``), taken from its master notebook.

As for the demo (:mod:`crashlab.report.demo`), the agent is not copied into the library: the master's ``%%writefile``
cells are written into a scratch folder, and the master's metadata (``crashlab.demo_agents``) says which file is
the agent and what it needs: modules to preload in the warm launcher, servers such as Temporal's, a launcher.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import nbformat

from crashlab.course.notebooks import repo_root, written_files
from crashlab.course.metadata import DemoAgent, lesson_meta


def masters(solutions: Path | None = None) -> list[Path]:
    solutions = solutions or repo_root() / "solutions"
    return sorted(solutions.glob("[0-9][0-9]_*.ipynb"))


def reference_spec(name: str, solutions: Path | None = None) -> tuple[Path, DemoAgent]:
    """``LESSON`` or ``LESSON:AGENT`` -> (master, demo-agent spec). LESSON is a master's number or name (``5``,
    ``05``, ``05_temporal``); without AGENT, the lesson's durable reference agent. ValueError in one line."""
    lesson, _, agent = name.partition(":")
    found = masters(solutions)
    if not found:
        raise ValueError(f"no master notebooks in {solutions or repo_root() / 'solutions'}: --reference needs the "
                         "course repository (run from it, or set CRASHLAB_ROOT)")
    key = lesson.strip().zfill(2) if lesson.strip().isdigit() else lesson.strip()
    master = next((m for m in found if m.stem == key or m.stem.split("_", 1)[0] == key), None)
    if master is None:
        raise ValueError(f"no lesson {lesson!r}: use one of {', '.join(m.stem for m in found)} (or its number)")
    specs = lesson_meta(nbformat.read(master, as_version=4)).get("demo_agents", [])
    if agent:
        spec = next((s for s in specs if s["agent"] in (agent, f"{agent}.py")), None)
        if spec is None:
            raise ValueError(f"{master.stem} has no reference agent {agent!r}: its agents are "
                             f"{', '.join(s['agent'] for s in specs) or 'none'}")
        return master, spec
    spec = next((s for s in specs if s.get("expect") == "durable"), None)
    if spec is None:
        raise ValueError(f"{master.stem} has no durable reference agent (its agents are meant to fail: "
                         f"{', '.join(s['agent'] for s in specs) or 'none'}); name one as {master.stem[:2]}:AGENT")
    return master, spec


def write_reference(master: Path, spec: Mapping[str, Any], folder: Path) -> Path:
    """Write every file the master's ``%%writefile`` cells write into ``folder``; the agent's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in written_files(nbformat.read(master, as_version=4)).items():
        (folder / name).write_text(source)
    return folder / spec["agent"]


__all__ = ["reference_spec", "write_reference", "masters"]
