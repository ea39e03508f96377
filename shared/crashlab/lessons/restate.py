"""Helpers of the Restate lesson (lesson 6): what the server knows about a world's order -- its object state, and
(from :mod:`crashlab.engines.restate.record`, which reads Restate's record) its invocations and its journal -- read
with the admin SQL API (so they work with no endpoint up), and the small tools the notebook's scenes share.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from crashlab.engines.restate.client import ENDPOINT_FILE, admin_sql, sql_quoted
from crashlab.engines.restate.record import (SERVICE_NAME, journal_entry_types, order_invocations, step_result,
                                             steps_of, world_service)
from crashlab.lessons.words import stopped_before
from crashlab.plumbing.tracebacks import cut_at_word


def _agent_dir(world) -> Path:
    return Path(getattr(world, "agent_dir", world))


def object_state(admin_url: str, world, order_id: str = "ORD-8842") -> dict:
    """The order object's durable state (what ctx.set wrote), read from the server, not from a handler."""
    rows = admin_sql(admin_url, "SELECT key, value_utf8 FROM state WHERE service_name = "
                                f"'{sql_quoted(world_service(world))}' AND service_key = '{sql_quoted(order_id)}'")
    return {row["key"]: json.loads(row["value_utf8"]) for row in rows}


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a process's output, bounded at ``limit`` characters after a whole word."""
    lines = text.strip().splitlines()
    return cut_at_word(lines[-1], limit) if lines else ""


def wait_for_status(admin_url: str, world, status: str, process=None, timeout: float = 30.0) -> dict:
    """Poll the order object's state until its status is ``status`` (an error after ``timeout`` seconds, or as soon
    as ``process``, the agent serving it, has exited)."""
    deadline = time.monotonic() + timeout
    while True:
        state = object_state(admin_url, world) if (_agent_dir(world) / ENDPOINT_FILE).exists() else {}
        if state.get("status") == status:
            return state
        if process is not None and not process.running():
            run = process.finish(5)
            raise AssertionError(stopped_before(status, run.returncode, run.stderr))
        if time.monotonic() > deadline:
            raise TimeoutError(f"the order did not reach {status!r} within {timeout:.0f} s (state: {state})")
        time.sleep(0.2)


def finish(process, timeout: float = 60.0) -> tuple[int, str]:
    """Wait for a background agent (killing it after ``timeout``); its exit code and last line."""
    run = process.finish(timeout)
    return run.returncode, last_line(run.stdout + run.stderr, 10_000)


STEP_PROBE = """
import json, sys
import order_steps
for step in json.loads(sys.argv[1]):
    try:
        print("RESULT " + json.dumps({"value": getattr(order_steps, step["step"])(*step["args"])}))
    except Exception as exc:
        print("RESULT " + json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


def run_steps(world, steps: list[dict], launcher="warm") -> list:
    """Call functions of order_steps.py outside any handler, in a process of their own (forked from ``launcher``);
    their results as data (``{"error": ...}`` for one that raised)."""
    from crashlab.harness import start_agent

    Path("step_probe.py").write_text(STEP_PROBE)
    done = start_agent("step_probe.py", world, args=[json.dumps(steps)], launcher=launcher).finish(60)
    results = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if len(results) != len(steps):
        raise AssertionError(f"the steps did not all run: {last_line(done.stderr)}")
    return results


def variant(name: str, *edits: tuple[str, str], source: str = "restate_order.py") -> str:
    """Write a copy of ``source`` with ``edits`` (old, new) made, as ``<stem>_<name>.py``; its module name. Edit
    given lines only: an answer may be spelled any way."""
    text = Path(source).read_text()
    for old, new in edits:
        if old not in text:
            raise AssertionError(f"{source} has changed shape: a given line is missing: {old.strip()!r}")
        text = text.replace(old, new, 1)
    target = Path(f"{Path(source).stem}_{name}.py")
    target.write_text(text)
    return target.stem


__all__ = ["SERVICE_NAME", "world_service", "object_state", "order_invocations", "steps_of", "journal_entry_types",
           "step_result", "last_line", "wait_for_status", "finish", "run_steps", "variant", "STEP_PROBE"]
