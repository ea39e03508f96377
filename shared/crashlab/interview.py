"""The interview question bank: what a weak answer sounds like, what a strong one says, the follow-up
to expect, and a multiple-choice self-check per question.

Self-check answers are stored as salted hashes, so the bank can be imported by a learner's notebook
without printing its own answer key; :func:`check` tells right from wrong.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    qid: str
    lesson: str
    question: str
    weak: str
    strong: str
    follow_up: str
    choices: tuple[str, ...]
    answer_hash: str

    def show(self) -> str:
        options = "\n".join(f"  {letter}) {text}" for letter, text in zip("ABCD", self.choices))
        return f"[{self.qid}, lesson {self.lesson}] {self.question}\n{options}"

    def reveal(self) -> str:
        return (f"[{self.qid}] {self.question}\n  weak:   {self.weak}\n  strong: {self.strong}\n"
                f"  expect: {self.follow_up}")


def _hash(qid: str, letter: str) -> str:
    return hashlib.sha256(f"crashlab-interview:{qid}:{letter.upper()}".encode()).hexdigest()[:16]


def _q(qid, lesson, question, weak, strong, follow_up, choices, right):
    return Question(qid, lesson, question, weak, strong, follow_up, tuple(choices), _hash(qid, right))


BANK: tuple[Question, ...] = (
    _q("q01", "1", "What does durable execution buy an agent that an ordinary retry does not?",
       "It retries the agent when it fails.",
       "After a crash the run resumes the conversation where it was: finished steps are not redone and recorded "
       "model answers are not paid for again, because progress lives outside the process.",
       "Where exactly does the state live, and what happens to a step that was running when the process died?",
       ["The agent restarts from the first step, but faster",
        "The run continues from its last recorded step, reusing recorded results",
        "The model is asked to remember what it did"], "B"),
    _q("q02", "1", "Your agent logs each step after its tool returns. Where can a crash still cause a duplicate?",
       "Nowhere, the log records every step.",
       "Between the tool's effect committing and the log line being written: the resume has no record of the step, "
       "asks again, and repeats the effect. Logging earlier moves the window, it cannot close it.",
       "How would you close that window? (Idempotency at the tool or the service.)",
       ["Between the effect and the log write", "Only if the disk is full", "Only before the model call"], "A"),
    _q("q03", "1", "Why log the model's decision before running the tool?",
       "So the log is more complete.",
       "So a crash between the decision and the effect does not cost the model call again: the resume finds the "
       "decided tool call in the log and runs it without asking. The only repeat left is an answer that died in flight.",
       "Which crash point still repeats a model call, and why can no engine avoid it?",
       ["To make the log smaller", "So the resume runs the logged decision instead of asking again",
        "Because the API requires it"], "B"),
    _q("q04", "1", "The last line of your JSONL log is half a record after a crash. What should the reader do?",
       "Skip lines that fail to parse.",
       "Drop only the unterminated tail: a record exists once its newline is durable. Damage to a complete line "
       "earlier in the file cannot come from a torn append, so it is an error that names the file and line.",
       "Why is silently skipping every unreadable line dangerous?",
       ["Drop the torn last line, fail loudly on damage elsewhere", "Delete the log and start again",
        "Skip any line that does not parse"], "A"),
    _q("q05", "2", "How do you make sure an agent never charges a card twice across a crash?",
       "Check whether we already charged before charging.",
       "Send every charge with an idempotency key derived from the durable identity of the work (order or workflow "
       "id plus step), retry with the same key, and prove it by killing the process at every step and counting "
       "charges in the provider's ledger.",
       "What if the provider has no idempotency keys?",
       ["A uuid4() key per request", "A timestamp key",
        "A key from the order/workflow id and the step"], "C"),
    _q("q06", "2", "Why does a uuid4() idempotency key not protect you?",
       "It does, every request is unique.",
       "Because the resume or retry computes a new uuid, so the service sees a different key and treats the request "
       "as new. Uniqueness per attempt is exactly the wrong property: the key must be the same for every attempt "
       "of the same step.",
       "Where would you compute and store the key so that it survives a crash?",
       ["It is too long for the provider", "Every attempt gets a new key, so retries look new",
        "uuid4 is not random enough"], "B"),
    _q("q07", "2", "A charge request timed out. Did the charge happen?",
       "No, it failed.",
       "Unknown: the service may have committed and lost the reply. The safe move is to retry the same request with "
       "the same idempotency key; the provider returns the first result if it did commit.",
       "Which errors are retryable and which are not? (No reply, 409 and 5xx versus a 400.)",
       ["Unknown; retry with the same key", "No, a timeout means nothing happened",
        "Yes; never retry"], "A"),
    _q("q08", "2", "Why should a provider reject the same key with different parameters?",
       "It should just replay the first response.",
       "A key reused for a different request is a bug; replaying would silently return the wrong charge, charging "
       "again would defeat the key. An error makes the bug loud.",
       "What parameters would you include in the request fingerprint?",
       ["To save storage", "Because replaying a different request's result would hide a bug",
        "Because keys expire"], "B"),
    _q("q09", "2", "Two workers resume the same order at once. What goes wrong with a read-check-write JSON ledger?",
       "Nothing, they both check the ledger first.",
       "Both read before either writes, both see no record, both act. The check and the write must be one atomic "
       "step: a UNIQUE key with INSERT ... ON CONFLICT DO NOTHING and a row-count check, or a lock per order.",
       "And what does the ledger do if its owner dies between the effect and recording it?",
       ["Both may act, because check and write are separate steps", "The file gets bigger",
        "The second worker crashes"], "A"),
    _q("q10", "3", "Is a LangGraph checkpointer the same as durable execution?",
       "Yes, it saves the state after each step.",
       "A checkpoint is saved at node boundaries; a crash inside a node re-runs the whole node on resume. A node with "
       "two side effects repeats the first when the crash lands between them. Keep one effect per node and make "
       "tools idempotent.",
       "What do the durability modes exit, async and sync change?",
       ["Yes, every line is journaled", "Only with Postgres",
        "No: resume restarts the interrupted node from its beginning"], "C"),
    _q("q11", "3", "You used InMemorySaver and the process restarted. What survives?",
       "The checkpoints.",
       "Nothing: in-memory checkpoints live in the process. Durability needs a persistent backend (SQLite, Postgres).",
       "How do you resume a thread from another process?",
       ["Everything", "Nothing", "Only the last node"], "B"),
    _q("q12", "4", "A DBOS step charges a card. Is the charge exactly once?",
       "Yes, DBOS guarantees exactly once.",
       "The step's result is recorded once, so a completed step is not re-run; but a step interrupted mid-way is run "
       "again (at-least-once). The charge needs an idempotency key derived from the workflow id and the step.",
       "What happens to in-flight workflows when you deploy changed workflow code?",
       ["The recorded result is reused, but an interrupted step runs again", "Yes, steps run exactly once",
        "No, every step runs twice"], "A"),
    _q("q13", "5", "Why can't a Temporal workflow call the model, the clock or random directly?",
       "Because it is slow.",
       "Workflow code is replayed from the event history on recovery and must take the same path every time; "
       "non-deterministic calls belong in activities, whose results are recorded. Use workflow.now() and "
       "workflow.random() for time and randomness inside the workflow.",
       "How do you ship a code change without breaking running workflows? (workflow.patched, replay tests.)",
       ["Replay must follow the same path, so nondeterminism goes into activities", "The sandbox has no network",
        "Temporal charges per call"], "A"),
    _q("q14", "5", "After a worker is killed, why might a Temporal order take 10+ seconds to finish on a new worker?",
       "Temporal is slow.",
       "The interrupted activity is retried only after its start-to-close (or heartbeat) timeout, and the workflow "
       "task waits on the dead worker's sticky queue; short activity timeouts and disabling the sticky cache cut "
       "recovery to a couple of seconds.",
       "What do you trade away with short timeouts?",
       ["The server restarts", "Timeouts and the sticky queue decide when work moves",
        "The history must be downloaded again"], "B"),
    _q("q15", "5", "How does an agent wait days for human approval without a process running?",
       "A loop with sleep.",
       "A durable wait: a signal (Temporal) or recv/send (DBOS) or interrupt()/Command(resume=) (LangGraph) with a "
       "timeout. The engine records the wait; any worker resumes it when the answer arrives, even after restarts.",
       "What happens when the timeout fires?",
       ["A thread sleeps until approval", "Polling the database", "A durable wait on a signal with a timeout"], "C"),
    _q("q16", "6", "Our booking agent sometimes reserves the same hotel twice. How do you debug it?",
       "Add more logging to the agent.",
       "Start from the provider's records for the order: two reservations with no key or different keys mean a "
       "missing or per-attempt key; overlapping workers mean no single-writer lock; a duplicate right after a "
       "restart is the after-effect crash window. Reproduce it under the crash harness at that point, fix the key's "
       "origin, and keep the crash matrix in CI.",
       "What evidence would convince you it is fixed?",
       ["Read the agent's own log", "Ask the model",
        "Compare the provider's reservations, keys and process timeline"], "C"),
    _q("q17", "6", "A durable step costs 2-30 ms. Does that matter for an agent?",
       "Yes, it makes agents slow.",
       "Against model calls of one to thirty seconds it is noise; what matters is that every model call and effect "
       "is a step, so replays do not re-burn tokens or repeat effects. Measure it: per-step cost against an "
       "fsync floor on your machine.",
       "When would you still pick the lightest engine?",
       ["It dominates run time", "It is small next to model latency", "It only matters on Postgres"], "B"),
)


def check(answers: dict[str, str]) -> dict[str, bool]:
    """Which of ``answers`` ({qid: letter}) are right. Unknown ids raise, so a typo is not a silent miss."""
    by_id = {q.qid: q for q in BANK}
    unknown = sorted(set(answers) - set(by_id))
    if unknown:
        raise KeyError(f"no such question(s): {unknown}")
    return {qid: _hash(qid, str(letter)) == by_id[qid].answer_hash for qid, letter in answers.items()}
