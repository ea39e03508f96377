"""The course's main job: every lesson's reference agent through the crash matrix, one table each.

Reference agents are not copied into the library: they are taken from the master notebooks'
``%%writefile`` cells, so the demo always runs exactly what the lessons teach.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from crashlab.grading.notebooks import repo_root, written_files
from crashlab.harness import crash_test


def reference_agents(solutions: Path) -> list[tuple[Path, dict]]:
    found = []
    for master in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(master, as_version=4)
        for spec in nb.metadata.get("crashlab", {}).get("demo_agents", []):
            found.append((master, spec))
    return found


def run_demo(jobs: int = 2, json_out: str | None = None, solutions: Path | None = None) -> int:
    solutions = solutions or repo_root() / "solutions"
    agents = reference_agents(solutions)
    if not agents:
        print(f"error: no reference agents found in {solutions}", file=sys.stderr)
        return 1
    started = time.time()
    results, failed = [], False
    with tempfile.TemporaryDirectory(prefix="crashlab-demo-") as scratch:
        for master, spec in agents:
            folder = Path(scratch) / master.stem
            folder.mkdir(exist_ok=True)
            for name, source in written_files(nbformat.read(master, as_version=4)).items():
                (folder / name).write_text(source)
            print(f"\n== {master.stem}: {spec['title']} ==", flush=True)
            matrix = crash_test(folder / spec["agent"], "all", expect=spec.get("expect", "durable"), jobs=jobs,
                                workdir=folder / ".rows")
            print(matrix, flush=True)
            failed |= spec.get("expect") != "observe" and not matrix.ok
            results.append({"lesson": master.stem, "title": spec["title"], **matrix.as_dict()})
    print(f"\ndemo finished in {time.time() - started:.0f} s")
    if json_out:
        Path(json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0
