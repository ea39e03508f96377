"""The course's main job: every lesson's reference agent through the crash matrix, one table each.

Reference agents are not copied into the library: they are taken from the master notebooks'
``%%writefile`` cells, so the demo always runs exactly what the lessons teach.

Most of a matrix's time is waiting -- on a world to start, an agent to be killed, an engine's timeout to run out,
a resume to finish -- so the demo runs two matrices at once (each with its own two rows at a time), the longest
first, with the servers they need started in the background as it begins, and every agent forked from a warm
launcher that has imported its engine (:func:`engine_preload`). It prints the matrices in the lessons' order
whatever order they finish in, and the same tables and summary as one at a time would.

A machine loaded by other work can fail a reference agent that is right: an engine's timeout runs out on a step
that was only slow, and the step (a model call) runs again. So a durable agent that fails while the machine is
loaded (:data:`LOADED_PER_CPU`) is not called FAILED on that run: its failing crash points run again at the end,
alone, one row at a time. Clean then, it held (and the demo says which points needed that); failing again on a
machine still loaded, the demo says it could not judge the agent, and why; failing on a machine that is not
loaded, it FAILED.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import nbformat

from crashlab.course.notebooks import repo_root, written_files
from crashlab.harness import BASELINE, Matrix, MatrixOptions, crash_test
from crashlab.plumbing.lines import fit
from crashlab.plumbing.outputs import DEMO, OutputError, write_output
from crashlab.plumbing.scratch import scratch_dir
from crashlab.course.metadata import DemoAgent, lesson_meta
from crashlab.report.terminal import WIDTH, terminal_summary

__all__ = ["LOADED_PER_CPU", "LoadWatch", "WIDTH", "engine_preload", "fit", "merged", "reference_agents",
           "reference_matrices", "rerun_alone", "run_demo", "terminal_summary"]


def reference_agents(solutions: Path) -> list[tuple[Path, DemoAgent]]:
    found: list[tuple[Path, DemoAgent]] = []
    for master in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(master, as_version=4)
        for spec in lesson_meta(nb).get("demo_agents", []):
            found.append((master, spec))
    return found


def engine_preload(agent: str, files: dict[str, str]) -> tuple[str, ...]:
    """What the warm launcher imports for an agent whose spec names no ``preload``: the registry's ``imports`` of
    every engine the agent file imports (or a file of its lesson that it imports does), so that no agent process
    pays for importing its engine after the fork. The registry says what is safe to import before a fork."""
    from crashlab.engines.registry import ENGINES

    seen, todo, packages = set(), [agent], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in files:
            continue
        seen.add(name)
        try:
            tree = ast.parse(files[name])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for module in modules:
                top = module.split(".")[0]
                todo.append(f"{top}.py")  # the lesson's own module, if it is one (else not in files)
                packages.add(top)
    return tuple(dict.fromkeys(module for entry in ENGINES.values() for module in entry.imports
                               if module.split(".")[0] in packages))


def _expected_seconds(spec: Mapping[str, Any]) -> float:
    """A rough guess at a matrix's length, to start the long ones first: rows, resumers, and the engines whose
    recovery waits on a server or a timeout (a spec that lists its points: those and the run without a crash)."""
    listed = spec.get("crash_points", "all")
    rows = len(listed) + 1 if isinstance(listed, list) else 15 if spec.get("fail") is None else 12
    per_row = 4.0 + (6.0 if spec.get("needs") else 0.0) + 1.5 * (int(spec.get("resumers", 1)) - 1)
    return rows * per_row


def reference_matrices(points: str | list[str] = "all", *, jobs: int = 2, solutions: Path | None = None,
                       verbose: bool = True, progress: bool = True, only_durable: bool = False,
                       fail_points: str | list[str] = "all", parallel: int = 1,
                       select: Callable[[str, DemoAgent], list[str] | None] | None = None):
    """Run every lesson's reference agents (taken from the masters) through the crash matrix, starting
    and stopping the servers they need. Yields ``(lesson, spec, matrix)`` in the masters' order.

    ``parallel`` matrices run at once (each with ``jobs`` rows at a time), the longest expected first, and the
    servers any of them needs start in the background at once; with 1, one after another, as they are yielded.

    An agent whose spec names a step that fails for good (``"fail": "reserve_item"``: the compensation lesson's)
    runs the failure path, at ``fail_points`` when ``points`` is a list (the do path's points are not all on it).
    ``select(lesson, spec)``: the points to run for that agent, or None to leave it out (the demo's re-runs).
    An agent whose spec lists its own ``crash_points`` (lesson 10's, crashed inside a stream) is run at those: a
    ``points`` list common to the order agents tests nothing it teaches, so a run at such a list leaves it out."""
    from crashlab.engines.needs import Needs

    solutions = solutions or repo_root() / "solutions"
    agents = reference_agents(solutions)
    if not agents:
        raise FileNotFoundError(f"no reference agents found in {solutions}")
    agents = [(master, spec) for master, spec in agents if not (only_durable and spec.get("expect") == "observe")
              and (points == "all" or select is not None or "crash_points" not in spec)]
    if select is not None:
        agents = [(master, spec) for master, spec in agents if select(master.stem, spec) is not None]
    with scratch_dir("crashlab-demo-") as scratch, Needs(scratch / "servers") as needs:
        runs = []
        for master, spec in agents:  # every lesson's files first: two agents of one lesson share its folder
            folder = scratch / master.stem
            if not folder.exists():
                folder.mkdir()
                files = written_files(nbformat.read(master, as_version=4))
                for name, source in files.items():
                    (folder / name).write_text(source)
            else:
                files = {p.name: p.read_text() for p in folder.glob("*.py")}
            options = MatrixOptions.from_spec(spec)
            if points != "all":
                options = options.but(points=fail_points if spec.get("fail") else points)
            if select is not None:
                options = options.but(points=select(master.stem, spec))
            options = options.but(jobs=jobs, preload=options.preload or engine_preload(spec["agent"], files))
            runs.append((master, spec, folder, options))

        stopping = threading.Event()  # set when the demo stops early (Ctrl-C): the matrices running stop too

        def run(master: Path, spec: Mapping[str, Any], folder: Path, options: MatrixOptions):
            return crash_test(folder / spec["agent"], options, workdir=folder / ".rows", stop=stopping,
                              extra_env=needs.env_for(spec), progress=progress)

        def header(master: Path, spec: Mapping[str, Any]) -> None:
            if verbose:
                print(f"\n== {master.stem}: {spec['title']} ==", flush=True)

        if parallel <= 1:
            for master, spec, folder, options in runs:
                header(master, spec)
                yield master.stem, spec, run(master, spec, folder, options)
            return
        needs.prepare(spec for _, spec, _, _ in runs)
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="demo-matrix") as pool:
            longest_first = sorted(range(len(runs)), key=lambda k: -_expected_seconds(runs[k][1]))
            futures = {k: pool.submit(run, *runs[k]) for k in longest_first}
            try:
                for k, (master, spec, _, _) in enumerate(runs):
                    matrix = futures[k].result()
                    header(master, spec)
                    yield master.stem, spec, matrix
            finally:
                for future in futures.values():
                    future.cancel()  # matrices not started yet never start (a failure, Ctrl-C)
                stopping.set()  # and those running end now, rather than the pool's exit waiting minutes for them


# A machine whose one-minute load average is this many times its CPUs is too busy to judge a timing-sensitive
# agent on: the demo itself, two matrices of two rows at once, mostly waiting, stays well under it.
LOADED_PER_CPU = 4.0


class LoadWatch:
    """The highest one-minute load average seen since :meth:`restart`, sampled every few seconds in a thread."""

    def __init__(self, every: float = 3.0):
        self.every, self.highest, self._stop = every, _load_average(), threading.Event()
        self._thread = threading.Thread(target=self._watch, name="demo-load", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.highest = max(self.highest, _load_average())

    def restart(self) -> None:
        self.highest = _load_average()

    @property
    def loaded(self) -> bool:
        return self.highest >= LOADED_PER_CPU * (os.cpu_count() or 1)

    def words(self) -> str:
        return f"load average up to {self.highest:.1f} on {os.cpu_count()} CPUs"

    def stop(self) -> None:
        self._stop.set()


def rerun_alone(failing: dict[tuple[str, str], list[str]], solutions: Path | None) -> dict[tuple[str, str], Matrix]:
    """The failing crash points of each agent (by lesson and title) run again, one agent and one row at a time (the
    run without a crash comes first, as in every matrix)."""
    again = {}
    for lesson, spec, matrix in reference_matrices(jobs=1, solutions=solutions, parallel=1, verbose=False,
                                                   select=lambda stem, spec: failing.get((stem, spec["title"]))):
        again[(lesson, spec["title"])] = matrix
    return again


def merged(first: Matrix, again: Matrix) -> Matrix:
    """``first`` with the rows ``again`` ran replaced by its rows."""
    rows = {row.point: row for row in again.rows}
    return replace(first, rows=[rows.get(row.point, row) for row in first.rows], not_run=0)


def run_demo(jobs: int = 2, json_out: str | None = None, solutions: Path | None = None,
             html_out: str | None = "crashlab-demo.html", force: bool = False, parallel: int = 2,
             beside: Callable[[], tuple[str, str]] | None = None) -> int:
    """Every reference agent through its matrix, the summary, the page; ``beside``, run in a thread meanwhile,
    gives a section of its own (a heading and a table's text) printed after the summary and shown on the page."""
    started, load = time.time(), _load()
    side = ThreadPoolExecutor(1, thread_name_prefix="demo-beside").submit(beside) if beside else None
    results, sections, timelines, unjudged = [], [], {}, {}
    watch = LoadWatch()
    # The page's timelines (a picture per row: minutes of matplotlib for the whole course) are drawn in another
    # process as each matrix comes back, while the rest still run.
    drawing = _drawing_pool() if html_out else None

    def draw(section) -> None:
        if drawing is not None:
            from crashlab.report import timeline_images

            timelines[id(section[1])] = drawing.submit(timeline_images, section[0], section[1])
    try:
        for lesson, spec, matrix in reference_matrices(jobs=jobs, solutions=solutions, parallel=parallel):
            print(fit(str(matrix)), flush=True)
            results.append({"lesson": lesson, "title": spec["title"], **matrix.as_dict()})
            sections.append((f"{lesson[:2]} {spec['title']}", matrix, lesson))
            draw(sections[-1])
        failing = {(lesson, results[k]["title"]): [row.point for row in matrix.rows if not row.ok and row.point != BASELINE]
                   for k, (_, matrix, lesson) in enumerate(sections) if matrix.expect != "observe" and not matrix.ok}
        if failing and watch.loaded:
            print(f"\n== the machine was loaded ({watch.words()}): the failing crash points of "
                  f"{len(failing)} durable agent(s) run again, alone ==", flush=True)
            first_load = watch.words()
            watch.restart()
            again = rerun_alone(failing, solutions)
            for k, (label, matrix, lesson) in enumerate(sections):
                rerun = again.get((lesson, results[k]["title"]))
                if rerun is None:
                    continue
                print(fit(f"{label}, re-run alone:\n{rerun}"), flush=True)
                both = merged(matrix, rerun)
                points = failing[(lesson, results[k]["title"])] or [BASELINE]
                note = (f"{', '.join(points)}: failed in the loaded run, {first_load}, and "
                        + ("held" if both.ok else "failed again") + " when run again alone")
                print(fit(f"{label}: {note}"), flush=True)
                timelines.pop(id(matrix), None)
                sections[k] = (f"{label} ({note})", both, lesson)
                results[k] = {**results[k], **both.as_dict(), "rerun_alone": points}
                draw(sections[k])
                if not both.ok and watch.loaded:
                    unjudged[id(both)] = (f"the machine was too loaded ({first_load}, then {watch.words()} for the "
                                          "re-run): make the demo again on a quieter machine")
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        watch.stop()
        if drawing is not None:
            drawing.shutdown(wait=False, cancel_futures=sys.exc_info()[0] is not None)
    failed = any(m.expect != "observe" and not m.ok and id(m) not in unjudged for _, m, _ in sections)
    print("\n" + terminal_summary(sections, unjudged=unjudged))
    extra = _section_beside(side)
    if html_out:
        from crashlab.report import write_report

        drawn = {key: future.result() for key, future in timelines.items()}
        title = "Durable agents: every lesson under the crash harness"
        try:
            print(f"wrote {write_report(html_out, sections, title, drawn, force=force, unjudged=unjudged, extra=extra)}")
        except OutputError as exc:  # it appeared while the demo ran
            print(f"error: {exc}", file=sys.stderr)
            return 1
    minutes, seconds = divmod(round(time.time() - started), 60)
    print(f"\ndemo finished in {minutes} min {seconds} s on {os.cpu_count()} CPUs (load average {load} at the "
          f"start, {_load()} at the end: other work on the machine makes every matrix slower)")
    if json_out:
        try:
            write_output(json_out, json.dumps(results, indent=2) + "\n", DEMO, force=force)
        except OutputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {json_out}")
    return 1 if failed or unjudged else 0


def _section_beside(side) -> list[tuple[str, str]]:
    """The section ``beside`` made while the matrices ran, printed: waited for with a line that says so, and a
    failure one line of its own, never a traceback that loses the matrices' page."""
    if side is None:
        return []
    if not side.done():
        print("\n(waiting for the section that runs beside the matrices)", flush=True)
    try:
        heading, text = side.result()
    except Exception as exc:  # noqa: BLE001 -- the matrices' results stand without it
        print(f"\nerror: the section beside the matrices failed: {type(exc).__name__}: {exc}", flush=True)
        return []
    print(f"\n== {heading} ==\n{fit(text)}", flush=True)
    return [(heading, text)]


def _drawing_pool():
    """One process for drawing the page's pictures: a new interpreter (no fork of this threaded one), one core at
    most, beside matrices that mostly wait."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))


def _load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not every system has one: then never "loaded"
        return 0.0


def _load() -> str:
    """The machine's one-minute load average, as the closing line shows it."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:  # not every system has one
        return "unknown"
