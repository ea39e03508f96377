"""What a correct agent must show at a crash point, and the judge that compares a row's audit with it.

A row is judged from the world's ledgers (the audit), never from what the agent says about itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crashlab.world.audit import Audit, Event
from crashlab.world.backlog_audit import BacklogAudit
from crashlab.world.screen_audit import ScreenAudit
from crashlab.harness.runs import ProcessRun
from crashlab.crash_points import ALLOWED_REPEAT, ALLOWED_RETRACTION, BASELINE, allowed_repeats, allowed_retractions
from crashlab.order import check_failure, failure_path

# What a correct agent must show at each crash point, by name.
EXPECTATIONS = {
    "durable": f"0 duplicates, finished, no repeated model call except {ALLOWED_REPEAT}",
    "no-repeats": f"finished, no repeated model call except {ALLOWED_REPEAT} (duplicates allowed)",
    "observe": "no verdict: report what happens",
}
# The same, through the failure path: the order is to end cleanly undone, not finished.
FAILURE_EXPECTATIONS = {
    "durable": f"0 duplicates, cleanly undone, no repeated model call except {ALLOWED_REPEAT}",
    "no-repeats": f"cleanly undone, no repeated model call except {ALLOWED_REPEAT} (duplicates allowed)",
    "observe": "no verdict: report what happens",
}


class Problems(list):
    """A row's problems: a list of sentences, said as sentences when a check quotes it (``f"... {row.problems}"``
    printed ``['after:charge_card: ...']``, the list's brackets and quotes around the words)."""

    def __str__(self) -> str:
        return "; ".join(self) if self else "no problems"


@dataclass
class Row:
    point: str
    reached: bool
    effects: dict
    duplicates: int
    model_calls: int
    repeated_model_calls: int
    finished: bool
    recovery_s: float | None
    problems: list[str] = field(default_factory=list)
    runs: list[ProcessRun] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    verdict: str | None = None  # through the failure path: the audit's verdict (finished = cleanly undone)
    screen: ScreenAudit | None = None  # what the user saw, for an agent that showed anything (reached rows only)

    def __post_init__(self) -> None:
        self.problems = Problems(self.problems)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"point": self.point, "reached": self.reached, "effects": self.effects,
                "duplicates": self.duplicates, "model_calls": self.model_calls,
                "repeated_model_calls": self.repeated_model_calls, "finished": self.finished,
                "recovery_s": None if self.recovery_s is None else round(self.recovery_s, 3),
                "ok": self.ok, "problems": self.problems,
                "runs": [{"pid": r.pid, "returncode": r.returncode, "seconds": round(r.seconds, 3),
                          "timed_out": r.timed_out} for r in self.runs]} | ({} if self.verdict is None else
                                                                             {"verdict": self.verdict}) \
            | ({} if self.screen is None else {"screen": {**self.screen.counts, "retractions": self.screen.retractions,
                                                          "allowed_retractions": allowed_retractions(self.point)}})


def judge(point: str, audit: Audit | BacklogAudit, reached: bool, last: ProcessRun | None, expect: str,
          fail: str | None = None) -> list[str]:
    """The problems at one crash point, each naming the point and what went wrong. With ``fail`` (the step that
    fails for good) the order must end cleanly undone instead of finished. A backlog (:mod:`crashlab.backlog`) is judged
    the same way: its audit names its turns (every tool turn, each summary asked for, the final answer) and what is
    left unfinished (orders never started, orders stuck part way)."""
    if not reached:
        return []  # already reported by the caller
    problems = []
    which = "the agent" if point == BASELINE else "the resumed agent"  # a clean run is never a resume
    if last is not None and last.timed_out:
        problems.append(f"{point}: {which} hung and was killed after its timeout")
    elif last is not None and last.returncode != 0:
        problems.append(f"{point}: {which} failed ({last.last_error_line()})")
    if expect == "observe":
        return problems
    allowed = allowed_repeats(point)
    if audit.repeated_model_calls > allowed:
        problems.append(f"{point}: {audit.repeated_model_calls} repeated model call(s) -- the model was asked "
                        f"again for an answer that was already recorded" + (" (1 is the unavoidable window here)"
                                                                             if allowed else ""))
    turns = audit.turns  # one model call per tool (per summary), then the final answer
    if fail is not None:  # one per do step up to the failure, at most one per undo step, and the final answer
        turns = sum(map(len, failure_path(check_failure(fail)[0]))) + 1
    if audit.model_calls > turns + allowed and audit.repeated_model_calls <= allowed:
        problems.append(f"{point}: {audit.model_calls} model calls for a {turns}-turn order -- the model was asked "
                        f"again for turns it had already answered (a reworded conversation is still a repeat)")
    if expect == "durable" and audit.duplicates:
        problems.append(f"{point}: " + ", ".join(audit.duplicate_findings()))
    if fail is not None:
        if audit.verdict != "cleanly undone":
            if audit.verdict == "completed":
                why = f"{fail} failed for good, yet the order completed"
            else:
                why = "; ".join(audit.inconsistencies) or "the world did nothing for it, not even a cancellation"
            problems.append(f"{point}: the order was not cleanly undone ({audit.verdict}: {why})")
    elif not audit.finished:
        problems.append(f"{point}: the order did not finish ({audit.unfinished()})")
    return problems


def judge_screen(point: str, screen: ScreenAudit) -> list[str]:
    """The problems with what the user saw in the row ``point`` (a point, a double crash's label or the baseline),
    from the screen's audit: every finding, and retractions beyond those allowed there (:data:`ALLOWED_RETRACTION`:
    one for each crash where the user watched an answer that was never received whole, none elsewhere)."""
    problems = [f"{point}: on the user's screen, {problem}" for problem in screen.describe_problems()]
    allowed = allowed_retractions(point)
    if screen.retractions > allowed:
        problems.append(f"{point}: {screen.retractions} retraction(s) of text the user was shown -- "
                        + (f"allowed: {ALLOWED_RETRACTION}" if allowed else "none is needed here: nothing was "
                           "shown of an answer the run did not receive whole"))
    return problems
