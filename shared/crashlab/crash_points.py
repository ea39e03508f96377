"""The crash-point vocabulary, in one place: what a crash point is (``before:OP`` or ``after:OP``, OP being the
Nth model call ``model#N``, a tool of the order ``TOOL`` (its first request), the Nth request for a tool ``TOOL#N``,
or the Nth tool request of any tool ``turn#N``), how it is written and read, when the world meets it, which
points a run passes through (:func:`default_points`; :func:`boundary_points` for a long task that starts a new run
or compacts its conversation every few turns), the pairs of a double crash, a matrix row's label, and the one rule
every verdict, table and picture applies to them. No other module writes or reads a point's text.

Every ``#N`` counts requests of the armed run on their arrival (a retry is a request too), since the point was armed:
``before:`` meets the Nth on its arrival, ``after:`` meets that same request once its effect or answer is committed.
``turn#N`` is the world-observable form of "turn N" of a long agent: a point named relative to a continue-as-new or a
compaction is a turn number, whichever tool that turn calls.

The rule: at ``after:model#N`` the model's answer was computed and logged by the world, then the process died
before it could record it. The resumed run has no record of that answer and asks again -- one repeated model
call that no engine can avoid, since no engine can record an answer it never received. Everywhere else a
repeated model call is an engine's (or an agent's) failure to resume the conversation.

Inside a streamed answer there is a third kind, ``mid:model#N@chunkK``: the Nth model call, killed once its Kth text
delta has reached the user's screen (K counts text deltas from 1; tool-input JSON is not watched). There too the
answer never reached the agent whole, so the same one repeat is allowed; and since the user saw part of an answer
that the resumed run must ask for again, one retraction of that turn from the screen is allowed, at ``mid:`` and at
a streamed ``after:model#N`` (whose ``message_stop`` the world holds back: every word shown, the answer not yet
received) -- :attr:`CrashPoint.allowed_retractions`, the screen's analogue of the allowed repeat.

How the world uses it (:mod:`crashlab.world.crashes`): it arms a :class:`CrashPoint`; where a request for a target
(``model`` or a tool) arrives and where its effect commits, it describes that instant as a :class:`Moment` and
asks :meth:`CrashPoint.meets`. Calls of a target are numbered (the ``N`` of ``model#N``) only for a point that
:meth:`CrashPoint.counts` them. So a new kind of point is a change here (its form in :meth:`CrashPoint.parse` and
``__str__``, what it counts and meets, where it falls in :func:`default_points`) plus, for a new kind of instant,
the world's site that describes it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Literal

from crashlab.order import ALL_TOOLS, TOOL_ORDER, UNDO_TOOLS, check_failure, failure_path

When = Literal["before", "mid", "after"]
WHENS: tuple[When, ...] = ("before", "after")  # every OP has these two; ``mid`` only a streamed model call
MID: When = "mid"
CHUNK = "@chunk"  # between a mid point's OP and its K
MODEL = "model"  # the target of a model call; any other target is a tool of the order, or TURN
TURN = "turn"    # the target of turn#N: the Nth tool request, whichever tool it is for
FORMS = (f"before:OP or after:OP, OP = model#N, turn#N (N >= 1), a tool or TOOL#N: {', '.join(TOOL_ORDER)}; or "
         f"mid:model#N{CHUNK}K (K >= 1), inside a streamed answer")
FORMS_WITH_UNDO = f"{FORMS} (with --fail, also an undo step: {', '.join(UNDO_TOOLS)})"
# How the rule reads in a verdict, a legend or a table's key.
ALLOWED_REPEAT = "one at after:model#N"
ALLOWED_RETRACTION = "one at mid:model#N@chunkK and a streamed after:model#N"
BASELINE = "(no crash)"  # the label of a matrix's row without a crash
THEN = " + "             # between the two points of a double crash's label: the second is met during the resume


@dataclass(frozen=True)
class Moment:
    """An instant at which the world may kill a run: ``when`` a request for ``target`` (:data:`MODEL` or a tool) has
    arrived (``before``) or its effect or answer is committed (``after``); ``call`` numbers that request among the
    run's requests the armed point counts (:meth:`CrashPoint.counts`: the target's, or every tool's for ``turn#N``),
    or is None where the armed point does not count them. ``chunk``: inside a streamed answer (``mid``), how many of
    its text deltas have been sent."""

    when: When
    target: str
    call: int | None = None
    chunk: int | None = None


@dataclass(frozen=True)
class CrashPoint:
    """``when`` is ``before``, ``after`` or ``mid``; ``target`` is :data:`MODEL`, a tool name or :data:`TURN` (any
    tool); ``call`` is the Nth request for the target, counted from 1 (a model call's and a turn's point always name
    one; a tool's without one meets its first request). ``chunk``: for ``mid`` only (a streamed model call), the text
    delta after which the run dies, counted from 1."""

    when: When
    target: str
    call: int | None = None
    chunk: int | None = None

    @classmethod
    def parse(cls, text: str | CrashPoint) -> CrashPoint:
        """``text`` as a crash point, normalised; a one-line ValueError saying what is wrong otherwise. A point no
        run can reach (a tool that does not exist) is refused here rather than reported as "never reached" after a
        whole run. The undo tools are tools of the order too."""
        if isinstance(text, CrashPoint):
            return text
        when, colon, op = (part.strip() for part in str(text).partition(":"))
        every = (f"before:OP or after:OP, OP = model#N, turn#N (N >= 1), a tool or TOOL#N: {', '.join(ALL_TOOLS)}; "
                 f"or mid:model#N{CHUNK}K inside a streamed answer")
        if when == MID and colon:
            return cls._parse_mid(str(text), op)
        if when not in WHENS or not colon:
            raise ValueError(f"crash point {text!r} is not {every}")
        numbered = re.fullmatch(r"([a-z_]+)#(\d+)", op)
        if numbered:
            op, call = numbered.group(1), int(numbered.group(2))
            if call < 1:
                raise ValueError(f"crash point {text!r}: requests are counted from 1 ({op}#1 is the first)")
            if op in (MODEL, TURN, *ALL_TOOLS):
                return cls(when, op, call)
        elif op in (MODEL, TURN):
            raise ValueError(f"crash point {text!r}: {op} needs its number, such as {cls(when, op, 1)}")
        if op not in ALL_TOOLS:
            close = difflib.get_close_matches(op, list(ALL_TOOLS), n=1)
            hint = f"did you mean {cls(when, close[0])}? " if close else ""
            raise ValueError(f"crash point {text!r}: unknown tool {op!r}: {hint}OP is model#N, turn#N, or a tool "
                             f"(TOOL or TOOL#N) of {', '.join(ALL_TOOLS)}")
        return cls(when, op)

    @classmethod
    def _parse_mid(cls, text: str, op: str) -> CrashPoint:
        """``mid:model#N@chunkK``: only a model call streams, and K counts its text deltas from 1."""
        found = re.fullmatch(rf"{MODEL}#(\d+){CHUNK}(\d+)", op)
        if not found:
            raise ValueError(f"crash point {text!r}: a point inside a stream is mid:model#N@chunkK (the Nth model "
                             f"call, killed once its Kth text delta reached the user); a tool call does not stream")
        call, chunk = int(found.group(1)), int(found.group(2))
        if call < 1 or chunk < 1:
            raise ValueError(f"crash point {text!r}: model calls and chunks are counted from 1 (mid:model#1@chunk1 "
                             f"is the first text delta of the first call)")
        return cls(MID, MODEL, call, chunk)

    def __str__(self) -> str:
        return f"{self.when}:{self.op}" + ("" if self.chunk is None else f"{CHUNK}{self.chunk}")

    @property
    def op(self) -> str:
        """The OP of the written form: ``model#N``, ``turn#N``, ``TOOL#N`` or the tool's name."""
        return f"{self.target}#{self.call}" if self.call is not None else self.target

    @property
    def is_model_call(self) -> bool:
        return self.target == MODEL

    @property
    def allowed_repeats(self) -> int:
        """Repeated model calls a correct agent may show for this crash: one at ``after:model#N`` and at
        ``mid:model#N@chunkK`` (see the module's docstring), none anywhere else."""
        return 1 if self.is_model_call and self.when != "before" else 0

    @property
    def allowed_retractions(self) -> int:
        """Turns a correct streaming agent may withdraw from the user's screen for this crash: one where part or all
        of an answer was shown and never received whole (``mid:model#N@chunkK``, a streamed ``after:model#N``),
        none anywhere else. A point whose call was not streamed shows nothing, so its allowance is never used."""
        return self.allowed_repeats

    def aims_at(self, target: str) -> bool:
        """Whether a request for ``target`` (:data:`MODEL` or a tool) is one this point is about: its own target, or
        any tool for a :data:`TURN` point."""
        return target == self.target or (self.target == TURN and target != MODEL)

    def counts(self, target: str) -> bool:
        """Whether the world must number the run's requests for ``target`` to know when this point is met. One point
        is armed at a time, so the world keeps one count: of the requests this point :meth:`aims_at`."""
        return self.call is not None and self.aims_at(target)

    def meets(self, moment: Moment) -> bool:
        """Whether the world, at ``moment``, has reached this point."""
        return (moment.when == self.when and self.aims_at(moment.target)
                and (self.call is None or moment.call == self.call)
                and (self.chunk is None or moment.chunk == self.chunk))


def check_crash_point(text: str) -> str:
    """``text`` as a crash point in its written form (see :meth:`CrashPoint.parse`)."""
    return str(CrashPoint.parse(text))


# --- a matrix row: no crash, one, or a second one during the resume -----------------------------------------------
def row_label(first: str | CrashPoint, then: str | CrashPoint | None = None) -> str:
    """A matrix row's label: :data:`BASELINE`, a point, or ``FIRST + SECOND`` for a double crash."""
    if str(first) == BASELINE:
        return BASELINE
    return str(CrashPoint.parse(first)) + ("" if then is None else THEN + str(CrashPoint.parse(then)))


def row_label_lines(label: str, width: int) -> list[str]:
    """A row's label as a table's first column of ``width`` characters prints it: whole when it fits, else a double
    crash's ``A + B`` as ``A +`` on a line of its own, then ``  B`` beside the row's cells."""
    first, then, second = label.partition(THEN)
    if len(label) <= width or not then:
        return [label]
    return [f"{first}{THEN.rstrip()}", f"  {second}"]


def row_points(label: str) -> tuple[CrashPoint, ...]:
    """The crashes of a row, read from its label: none for :data:`BASELINE`, one, or two for a double crash."""
    if label == BASELINE:
        return ()
    return tuple(CrashPoint.parse(part) for part in label.split(THEN.strip()))


def allowed_repeats(label: str | CrashPoint) -> int:
    """How many repeated model calls a correct agent may show in the row ``label`` (a point, a double crash's
    label, or :data:`BASELINE`): one for each of its crashes at ``after:model#N`` or ``mid:model#N@chunkK`` (the
    answer died in flight, see the module's docstring), none otherwise."""
    crashes = (label,) if isinstance(label, CrashPoint) else row_points(label)
    return sum(point.allowed_repeats for point in crashes)


def expected_repeat_forms(labels: Iterable[str]) -> list[str]:
    """Where the rows ``labels`` may show their one expected repeat, in the vocabulary's own forms: a key under a
    figure of these rows names ``after:model#N``, and ``mid:model#N@chunkK`` too once a row crashed inside a
    stream -- a key that named only the first would leave the second's orange cell unexplained. Each key joins them
    in its own way (a line each in a figure, ``<code>`` on a page)."""
    kinds = {point.when for label in labels for point in row_points(label) if point.allowed_repeats}
    return [form for when, form in (("after", "after:model#N"), (MID, f"mid:model#N{CHUNK}K"))
            if when in kinds] or ["after:model#N"]


def allowed_retractions(label: str | CrashPoint) -> int:
    """How many retractions from the user's screen a correct streaming agent may show in the row ``label``: one for
    each of its crashes at ``mid:model#N@chunkK`` or ``after:model#N`` (see :attr:`CrashPoint.allowed_retractions`)."""
    crashes = (label,) if isinstance(label, CrashPoint) else row_points(label)
    return sum(point.allowed_retractions for point in crashes)


# --- the points a run passes through --------------------------------------------------------------------------------
def _both(target: str, call: int | None = None) -> list[str]:
    return [str(CrashPoint(when, target, call)) for when in WHENS]


def default_points(model_calls: int = len(TOOL_ORDER) + 1, *, stream: bool = False) -> list[str]:
    """Every crash point a correct run of the order task passes through, in order: four model calls (one per
    tool, then the final answer) and three tool calls. ``stream``: the run streams its model calls, so each has a
    point inside its stream too, ``mid:model#N@chunk2`` (every reply of the order has at least three text
    deltas), and the final answer one more, ``mid:model#N@chunk6`` (its first words on screen, most still to come)."""
    points: list[str] = []
    for n in range(1, model_calls + 1):
        before, after = _both(MODEL, n)
        mids = [CrashPoint(MID, MODEL, n, 2)] + ([CrashPoint(MID, MODEL, n, 6)] if n == model_calls else [])
        points += [before, *(str(mid) for mid in mids if stream), after]
        if n <= len(TOOL_ORDER):
            points += _both(TOOL_ORDER[n - 1])
    return points


def boundary_points(turns: int, period: int, summaries: bool = True) -> list[str]:
    """The crash points around every boundary of a long task of ``turns`` tool turns that starts a new run (a
    continue-as-new) or compacts its conversation every ``period`` turns, in the order a run passes through them.

    The plan, as the world numbers it: model call k chooses tool turn k, until the first boundary; after turn K (a
    multiple of ``period``, K < ``turns``) a summary is asked for when ``summaries`` -- one model call more -- and the
    next model call chooses turn K + 1; after the last turn, the final answer. So at the j-th boundary the summary is
    model call M = K + j and the first model call of the new run M + 1 (M = K without summaries).

    The points: the first turn and the last (``before:``/``after:turn#N``); at each boundary the last turn of the run
    (``after:turn#K``) and the first of the next (``before:`` and ``after:turn#K+1``); each summary's
    ``after:model#M`` (its answer lost in flight: the one repeat a correct agent may show); the first model call of
    each new run (``before:`` and ``after:model#M+1``). A pure function of the plan: a lesson checks it against its
    own run's model ledger."""
    if not (type(turns) is int and turns >= 1 and type(period) is int and period >= 1):
        raise ValueError(f"boundary_points needs turns >= 1 and period >= 1, got turns={turns!r}, period={period!r}")
    chosen: set[CrashPoint] = {CrashPoint(when, TURN, n) for when in WHENS for n in (1, turns)}
    sequence: list[CrashPoint] = []  # every instant of the plan, in order
    model, boundaries = 0, 0
    for turn in range(1, turns + 1):
        model += 1
        sequence += [CrashPoint(when, MODEL, model) for when in WHENS]
        sequence += [CrashPoint(when, TURN, turn) for when in WHENS]
        if turn % period == 0 and turn < turns:
            boundaries += 1
            chosen |= {CrashPoint("after", TURN, turn), CrashPoint("before", TURN, turn + 1),
                       CrashPoint("after", TURN, turn + 1)}
            if summaries:
                model += 1
                sequence += [CrashPoint(when, MODEL, model) for when in WHENS]
                chosen.add(CrashPoint("after", MODEL, model))
            chosen |= {CrashPoint(when, MODEL, model + 1) for when in WHENS}
    sequence += [CrashPoint(when, MODEL, model + 1) for when in WHENS]
    return [str(point) for point in sequence if point in chosen]


def failure_points(tool: str) -> list[str]:
    """Every crash point of the failure path when ``tool`` fails for good: the model calls that choose the do
    steps, every do step (the failing one too: its ``after:`` is once the world has answered the failure) and
    every undo step. No model call after the failure: code that owns the compensation asks the model nothing."""
    do, undo = failure_path(tool)
    points = default_points(len(do))
    for step in undo:
        points += _both(step)
    return points


def check_on_path(point: str, failing: str | None = None) -> str:
    """``point`` in its written form if a run can pass through it: a model call, or a tool the order calls -- on
    the do path, or with ``failing`` (the tool that fails for good) on that failure path. A one-line ValueError
    otherwise, before any run: a point off the path would only come back as "never reached" after the whole row."""
    crash = CrashPoint.parse(point)
    if crash.is_model_call or crash.target == TURN:
        return str(crash)
    do, undo = failure_path(failing) if failing else (list(TOOL_ORDER), [])
    if crash.target in do or crash.target in undo:
        return str(crash)
    if failing is None:
        raise ValueError(f"crash point {point!r}: {crash.target} is an undo step, called only when a step fails for "
                         f"good: give the failure too (--fail STEP, or fail= in Python; such as reserve_item)")
    raise ValueError(f"crash point {point!r}: when {failing} fails for good the order calls {', '.join(do)}, then "
                     f"{', '.join(undo)}: {crash.target} is never called")


def double_crash_pairs(sample: int | None = 6, fail: str | None = None) -> list[tuple[str, str]]:
    """Pairs (first crash, crash during the resume) that a correct resume always reaches: the second
    point is at a tool that comes after the first point's step, so no durable record can skip it. With
    ``fail``, the tools of the failure path (the do steps up to the failure, then the undo steps); a model
    call is paired only for a do step (code that owns the undo asks the model nothing for it). ``sample``: that
    many pairs, spread evenly over all of them (None: all)."""
    if fail is None:
        tools = list(TOOL_ORDER)
    else:
        do, undo = failure_path(check_failure(fail)[0])
        tools = do + undo
    pairs = []
    for i, first_tool in enumerate(tools):
        for later in tools[i + 1:]:
            firsts = _both(first_tool)
            if first_tool in TOOL_ORDER:
                firsts.insert(0, str(CrashPoint("after", MODEL, i + 1)))
            for first in firsts:
                pairs.append((first, str(CrashPoint("after", later))))
    if sample is not None and sample < len(pairs):
        step = len(pairs) / sample
        pairs = [pairs[int(k * step)] for k in range(sample)]
    return pairs


__all__ = ["ALLOWED_REPEAT", "ALLOWED_RETRACTION", "BASELINE", "CHUNK", "FORMS", "FORMS_WITH_UNDO", "MID", "MODEL",
           "THEN", "TURN", "WHENS", "CrashPoint", "Moment", "When", "allowed_repeats", "allowed_retractions",
           "boundary_points", "check_crash_point", "check_on_path", "default_points", "double_crash_pairs",
           "expected_repeat_forms", "failure_points", "row_label", "row_label_lines", "row_points"]
