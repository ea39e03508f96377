"""What a stalled world costs in model calls, engine by engine: the bill of zombie attempts.

An engine that gives up on an attempt after a timeout -- Temporal's start-to-close, Restate's inactivity and abort
timeouts, a client's own read timeout -- tries again while the first attempt still waits on its request; when the
world goes on, every request that reached it is answered, and every answer is billed, though the workflow records
one. The crash harness's rule allows it (no answer was recorded), and no crash point shows it: it takes a stall.

:func:`zombie_cost` runs each lesson's durable reference agent, taken from its master as the soak takes it, on one
order with no kills and the world frozen (``pause:SECONDS``) once the charge is in its ledger and the order's next
request has reached it, and counts the model calls beyond a clean run's. The same from the command line, one lesson at a time::

    crashlab soak --reference 05 --orders 1 --kills none --world-faults pause:40@charge_card
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crashlab.engines.needs import needs_of
from crashlab.plumbing.scratch import scratch_dir
from crashlab.soak.reference import reference_spec, write_reference
from crashlab.soak.run import soak
from crashlab.soak.world import WorldFault

# The lessons whose reference agents run on an engine: LangGraph, DBOS, Temporal, Restate.
ENGINE_LESSONS = ("03", "04", "05", "06")


def zombie_cost(lessons: tuple[str, ...] = ENGINE_LESSONS, pause: float = 40.0, after: str = "charge_card",
                jobs: int | None = None) -> list[dict]:
    """One row per lesson: its agent, the model calls of a clean run, of the run that met the pause, the calls beyond
    the clean run's (``extra_model_calls``), and whether the order still finished once, with no duplicate. ``pause``
    should outlast the engines' timeouts (Restate's are 30 s and 5 s in lesson 6); ``jobs`` lessons run at once, all
    of them unless told: each run spends its time waiting on the frozen world, not on the cores."""
    with scratch_dir("crashlab-zombies-") as folder:
        def one(lesson: str) -> dict:
            master, spec = reference_spec(lesson)
            agent = write_reference(master, spec, Path(folder) / lesson)
            result = soak(agent, 1, resumers=(1, 1), kills="none", world_faults=[WorldFault("pause", pause, after)],
                          preload=tuple(spec.get("preload", ())), needs=needs_of(spec),
                          launcher=spec.get("launcher", "warm"), max_rounds=3, progress=False)
            [order] = result.orders
            audit = order.audit
            return {"lesson": lesson, "agent": spec["agent"], "title": spec.get("title", spec["agent"]),
                    "pause_s": pause, "clean_model_calls": result.settings.get("clean_model_calls"),
                    "model_calls": audit.model_calls if audit else None,
                    "extra_model_calls": result.extra_model_calls,
                    "repeated_model_calls": audit.repeated_model_calls if audit else None,
                    "duplicates": order.duplicates, "finished": bool(audit and audit.finished),
                    "seconds": round(result.seconds, 1)}

        with ThreadPoolExecutor(max(1, jobs or len(lessons))) as pool:
            return list(pool.map(one, lessons))


__all__ = ["ENGINE_LESSONS", "zombie_cost"]
