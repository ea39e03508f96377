"""The course's main job: every lesson's reference agent through the crash matrix, one table each.

Reference agents are not copied into the library: they are taken from the master notebooks'
``%%writefile`` cells, so the demo always runs exactly what the lessons teach.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat

from crashlab.grading.notebooks import repo_root, written_files
from crashlab.harness import crash_test
from crashlab.scratch import scratch_dir


def reference_agents(solutions: Path) -> list[tuple[Path, dict]]:
    found = []
    for master in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(master, as_version=4)
        for spec in nb.metadata.get("crashlab", {}).get("demo_agents", []):
            found.append((master, spec))
    return found


def reference_matrices(points: str | list[str] = "all", *, jobs: int = 2, solutions: Path | None = None,
                       verbose: bool = True, progress: bool = True, only_durable: bool = False):
    """Run every lesson's reference agents (taken from the masters) through the crash matrix, starting
    and stopping the servers they need. Yields ``(lesson, spec, matrix)`` as each finishes."""
    from crashlab.needs import Needs

    solutions = solutions or repo_root() / "solutions"
    agents = reference_agents(solutions)
    if not agents:
        raise FileNotFoundError(f"no reference agents found in {solutions}")
    with scratch_dir("crashlab-demo-") as scratch, Needs(scratch / "servers") as needs:
        for master, spec in agents:
            if only_durable and spec.get("expect") == "observe":
                continue
            folder = scratch / master.stem
            folder.mkdir(exist_ok=True)
            for name, source in written_files(nbformat.read(master, as_version=4)).items():
                (folder / name).write_text(source)
            if verbose:
                print(f"\n== {master.stem}: {spec['title']} ==", flush=True)
            chosen = spec.get("crash_points", "all") if points == "all" else points
            matrix = crash_test(folder / spec["agent"], chosen, expect=spec.get("expect", "durable"), jobs=jobs,
                                workdir=folder / ".rows", resumers=int(spec.get("resumers", 1)),
                                launcher=spec.get("launcher", "warm"), preload=tuple(spec.get("preload", ())),
                                extra_env=needs.env_for(spec), progress=progress)
            yield master.stem, spec, matrix


def run_demo(jobs: int = 2, json_out: str | None = None, solutions: Path | None = None,
             html_out: str | None = "crashlab-demo.html") -> int:
    started = time.time()
    results, failed, sections = [], False, []
    try:
        for lesson, spec, matrix in reference_matrices(jobs=jobs, solutions=solutions):
            print(matrix, flush=True)
            failed |= spec.get("expect") != "observe" and not matrix.ok
            results.append({"lesson": lesson, "title": spec["title"], **matrix.as_dict()})
            sections.append((f"{lesson[:2]} {spec['title']}", matrix))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n" + summary_table(sections))
    if html_out:
        from crashlab.report import write_report

        print(f"wrote {write_report(html_out, sections, 'Durable agents: every lesson under the crash harness')}")
    print(f"\ndemo finished in {time.time() - started:.0f} s")
    if json_out:
        Path(json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


def summary_table(sections) -> str:
    """One table, crash points down and agents across: duplicates / repeated model calls / finished."""
    points = []
    for _, matrix in sections:
        points += [row.point for row in matrix.rows if row.point not in points]
    labels = [label for label, _ in sections]
    width = max(len(p) for p in points + ["crash point"])
    cells = [max(11, len(label)) for label in labels]
    out = ["every agent at every crash point: duplicates / repeated model calls / finished (recovery s)",
           "  ".join([f"{'crash point':<{width}}"] + [f"{label:<{w}}" for label, w in zip(labels, cells)])]
    for point in points:
        line = [f"{point:<{width}}"]
        for (_, matrix), w in zip(sections, cells):
            row = next((r for r in matrix.rows if r.point == point), None)
            text = "-" if row is None else (f"{row.duplicates}/{row.repeated_model_calls}/"
                                            f"{'yes' if row.finished else 'NO'}"
                                            + (f" ({row.recovery_s:4.1f})" if row.recovery_s is not None else ""))
            line.append(f"{text:<{w}}")
        out.append("  ".join(line))
    return "\n".join(out)
