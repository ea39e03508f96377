"""The screen's audit: what the user saw of one order, judged against what the conversation recorded.

Ground truth, all from the world's own ledgers, never from the agent:

- the model ledger: every reply the world gave for the order, its turn (the assistant messages in its request,
  plus one) and which reply of each turn the conversation went on with -- the *recorded* one: its tool_use ids are
  in a later request; for a final answer (no tool_use), the last one served;
- the screen ledger (:mod:`crashlab.world.screen`): every show and retraction, in arrival order.

What the user sees is the screen's rows replayed (a show appends, a retraction of a turn takes that turn's rows
away); what they should see is the recorded replies' text, turn by turn. The two are compared word by word (each
row split on its own, so two rows never glue into one word). The findings:

- **shown twice**: recorded text that appears again;
- **out of order**: recorded text shown in another place than the answer has it;
- **lost**: recorded text that is not on the screen at the end;
- **never recorded**: text on the screen that no recorded reply has -- from a reply the conversation did not go on
  with (a real model words a repeated call differently), or from none;
- **identity reused**: what the senders claimed, checked on its own: an identity -- (turn, chunk) or (stream,
  offset) -- still shown twice, or shown after a later one of its turn or stream (offsets from a counter that
  starts again in a new process collide here even when the words look right);
- **retractions**: how many times a turn was withdrawn. One is allowed where the user was watching an answer that
  was never received whole (:func:`crashlab.crash_points.allowed_retractions`), none elsewhere: a verdict
  applies that rule (:func:`crashlab.harness.verdicts.judge_screen`).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.world import ledger
from crashlab.world.screen_ledger import ScreenLedger, replay

FINDINGS = ("shown twice", "out of order", "lost", "never recorded", "identity reused")


@dataclass
class ScreenAudit:
    """What the user saw of ``order_id`` (``visible``), what the conversation recorded (``expected``), and what is
    wrong between them: each finding a piece of text (or an identity), in the words of :data:`FINDINGS`."""

    order_id: str
    expected: str = ""
    visible: str = ""
    shows: int = 0
    retractions: int = 0
    shown_twice: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    never_recorded: list[str] = field(default_factory=list)
    identity_reused: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """Findings per kind, in the words of :data:`FINDINGS`."""
        lists = (self.shown_twice, self.out_of_order, self.lost, self.never_recorded, self.identity_reused)
        return {name: len(found) for name, found in zip(FINDINGS, lists)}

    @property
    def clean(self) -> bool:
        """Every recorded word shown once, in order, nothing else, every identity once (retractions aside)."""
        return not any(self.counts.values())

    def describe_problems(self) -> list[str]:
        """One sentence per kind of finding, quoting the first few, e.g. ``'shown twice: "Next step:"'``."""
        lists = (self.shown_twice, self.out_of_order, self.lost, self.never_recorded, self.identity_reused)
        return [f"{name}: " + "; ".join(found[:3]) + (f" (and {len(found) - 3} more)" if len(found) > 3 else "")
                for name, found in zip(FINDINGS, lists) if found]

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ScreenAudit:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})

    def __str__(self) -> str:
        retractions = f"{self.retractions} retraction{'s' * (self.retractions != 1)}"
        return (f"screen of {self.order_id}: {self.shows} show{'s' * (self.shows != 1)}, {retractions} -- "
                + ("; ".join(self.describe_problems()) or "clean"))

    __repr__ = __str__


def _quote(words: list[str]) -> str:
    return json.dumps(cut_at_word(" ".join(words), 80))


def replies(ledger_dir: Path, order_id: str) -> list[dict]:
    """The order's answered model calls, in order: ``{"seq", "id", "turn", "text", "tool_ids", "request_ids"}``
    (``request_ids``: the tool_use ids its request already holds)."""
    conn = ledger.connect(Path(ledger_dir) / ledger.MODEL_LEDGER, readonly=True)
    try:
        rows = conn.execute("SELECT seq, request, reply FROM calls WHERE order_id = ? AND status = 200 ORDER BY seq",
                            (order_id,)).fetchall()
    finally:
        conn.close()
    found = []
    for row in rows:
        request, reply = json.loads(row["request"]), json.loads(row["reply"])
        blocks = [b for message in request for b in message["content"] if b["type"] == "tool_use"]
        found.append({"seq": row["seq"], "id": reply.get("id"), "turn": sum(m["role"] == "assistant" for m in request) + 1,
                      "text": "".join(b["text"] for b in reply["content"] if b["type"] == "text"),
                      "tool_ids": [b["id"] for b in reply["content"] if b["type"] == "tool_use"],
                      "request_ids": [b["id"] for b in blocks]})
    return found


def recorded_replies(answered: list[dict]) -> dict[int, dict]:
    """Turn -> the reply the conversation went on with (see the module's docstring)."""
    later = {tool_id for reply in answered for tool_id in reply["request_ids"]}
    recorded: dict[int, dict] = {}
    for reply in answered:
        if (reply["tool_ids"] and set(reply["tool_ids"]) <= later) or not reply["tool_ids"]:
            recorded[reply["turn"]] = reply
    return recorded


def _within(run: list[str], words: list[str]) -> bool:
    n = len(run)
    return any(words[i:i + n] == run for i in range(len(words) - n + 1))


def _cover(run: list[str], recorded: list[str]) -> list[tuple[bool, list[str]]]:
    """An inserted run, cut into pieces: (True, the longest piece recorded text has -- two words at least, unless the
    run is one word) or (False, words it has not), neighbouring words of neither kept together."""
    pieces: list[tuple[bool, list[str]]] = []
    i = 0
    while i < len(run):
        n = next((n for n in range(len(run) - i, 0, -1) if _within(run[i:i + n], recorded)
                  and (n > 1 or len(run) == 1)), 0)  # one common word ("is") inside other text is no repeat
        if n:
            pieces.append((True, run[i:i + n]))
        elif pieces and not pieces[-1][0]:
            pieces[-1][1].append(run[i])
        else:
            pieces.append((False, [run[i]]))
        i += max(n, 1)
    return pieces


def _identities(visible: list[dict], result: ScreenAudit) -> None:
    """The identity findings: one still shown twice, or after a later one of its turn (or stream)."""
    seen: set[tuple] = set()
    top: dict[tuple, int] = {}
    for row in visible:
        if row["turn"] is not None and row["chunk"] is not None:
            key, scope, place = ("turn", row["turn"], "chunk", row["chunk"]), ("turn", row["turn"]), row["chunk"]
        elif row["stream"] is not None and row["offset"] is not None:
            key, scope, place = ("stream", row["stream"], "offset", row["offset"]), ("stream", row["stream"]), row["offset"]
        else:
            continue
        name = f"({key[0]} {key[1]}, {key[2]} {key[3]})"
        if key in seen:
            result.identity_reused.append(f"{name} shown twice: {_quote([row['text']])}")
        elif place < top.get(scope, -1):
            result.identity_reused.append(f"{name} shown after {key[2]} {top[scope]}")
        seen.add(key)
        top[scope] = max(top.get(scope, -1), place)


def audit_screen(ledger_dir: str | Path, order_id: str) -> ScreenAudit:
    """Judge what the screen showed for ``order_id`` against the model ledger (see the module's docstring)."""
    ledger_dir = Path(ledger_dir)
    recorded = recorded_replies(replies(ledger_dir, order_id))
    rows = ScreenLedger(ledger_dir, readonly=True).rows(order_id)
    visible = replay(rows)
    result = ScreenAudit(order_id, "".join(recorded[t]["text"] for t in sorted(recorded)),
                         "".join(row["text"] for row in visible), sum(r["kind"] == "show" for r in rows),
                         sum(r["kind"] == "retract" for r in rows))
    _identities(visible, result)
    expected = [w for t in sorted(recorded) for w in recorded[t]["text"].split()]
    shown = [w for row in visible for w in row["text"].split()]
    lost: list[list[str]] = []
    again: list[list[str]] = []
    unrecorded: list[list[str]] = []
    matcher = difflib.SequenceMatcher(a=expected, b=shown, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            lost.append(expected[i1:i2])
        if op in ("insert", "replace"):
            for is_recorded, piece in _cover(shown[j1:j2], expected):
                (again if is_recorded else unrecorded).append(piece)
    for piece in again:  # recorded text shown in one place and missing from another: it moved
        if piece in lost:
            lost.remove(piece)
            result.out_of_order.append(_quote(piece))
        else:
            result.shown_twice.append(_quote(piece))
    result.lost = [_quote(piece) for piece in lost]
    result.never_recorded = [_quote(piece) for piece in unrecorded]
    return result


__all__ = ["FINDINGS", "ScreenAudit", "audit_screen", "recorded_replies", "replies"]
