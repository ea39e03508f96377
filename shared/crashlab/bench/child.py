"""The child process's side, what ``python -m crashlab.bench --engine ...`` runs: ``_child_main`` starts a
``_watchdog`` (the child never outlives its parent or its time), then either the per-step measurement or a
phase of the recovery scene (``_recovery_phase``: ``crash`` runs into the blocking step and is killed
there, ``resume`` finishes the workflow and says when), and writes the result as JSON."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

from crashlab.bench.common import BenchError, workloads_for
from crashlab.bench.measure import measure, workload_for
from crashlab.engines.growth import bytes_by_turn
from crashlab.engines.registry import imports_of_variant
from crashlab.plumbing.scratch import make_scratch, remove_scratch


def _recovery_phase(engine: str, workdir: Path, phase: str, steps: int, wid: str, t_main: float,
                    result_bytes: int = 0) -> dict:
    """The recovery scene, inside a child: ``crash`` runs the workflow into the blocking step (the parent
    kills it there); ``resume`` finishes it and reports when. With ``result_bytes``, the workflow is the engine's
    long agent, and ``resume`` also reports the bytes its record held once each turn was recorded (``sizes``)."""
    # what it imports before its clock starts: the registry's (engine and framework), its workload's
    for module in (*imports_of_variant(engine), *workloads_for(engine).preload):
        importlib.import_module(module)
    t_ready = time.time()  # interpreter up, the engine imported: the engine's own work starts here
    workload = workload_for(engine, workdir, recovery=True)
    workload.result_bytes = result_bytes
    try:
        if phase == "crash":
            workload.launch()
            workload.start_recoverable(steps, wid)
            raise BenchError("the workflow finished although it should have blocked and been killed")
        workload.launch()  # DBOS.launch() recovers the PENDING workflow in the background
        result = workload.resume(steps, wid)
        t_done = time.time()
        sizes = bytes_by_turn(workload.record(wid), workload.ends_turn) if result_bytes else None
        return {"engine": engine, "t_main": t_main, "t_ready": t_ready, "t_done": t_done, "result": result,
                "steps_run": workload.executed, "sizes": sizes}
    finally:
        workload.close()


def _watchdog(max_seconds: float | None, scratch: str | None = None) -> None:
    """End this child if the benchmark that started it is gone, or when its time is up: a measurement
    process must never outlive its parent (the one about to be killed would wait forever).

    It ends the process with ``os._exit``, from a thread, while the main thread may be stuck inside an engine:
    a ``SystemExit`` would only end this thread, and cleanup that waits on the engine could hang. So the one
    thing to clean up, the child's own scratch folder (``scratch``, made when no ``--workdir`` was given), is
    removed here first. A ``--workdir`` belongs to the parent, which removes it -- unless the parent is the one
    that died, SIGKILLed: then nothing in the child can tell a folder to keep from one to remove."""
    import threading

    parent = os.getppid()
    deadline = time.monotonic() + max_seconds if max_seconds else None

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if os.getppid() != parent or (deadline is not None and time.monotonic() > deadline):
                remove_scratch(scratch)
                os._exit(3)

    threading.Thread(target=watch, name="bench-watchdog", daemon=True).start()


def _child_main(args: argparse.Namespace, t_main: float) -> int:
    scratch = None if args.workdir else str(make_scratch("crashlab-bench-"))
    _watchdog(args.max_seconds, scratch)
    workdir = Path(args.workdir or str(scratch))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.phase:
            got = _recovery_phase(args.engine, workdir, args.phase, args.steps, args.wid, t_main, args.child_result_bytes)
        else:
            got = measure(args.engine, workdir, args.steps, args.repeats)
    finally:
        remove_scratch(scratch)
    text = json.dumps(got)
    if args.json:
        tmp = Path(args.json).with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, args.json)
    else:
        print(text)
    sys.stdout.flush()
    os._exit(0)  # engines' background threads have nothing left to do; do not wait on them
