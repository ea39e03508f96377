"""The interview bank's questions of the streaming lesson (lesson 10): what the user sees when a streamed step runs
again, and why an engine's own deduplication of a stream does not cover a retried step. A module of its own beside
:mod:`crashlab.lessons.interview.bank`, which holds every other lesson's and adds these at its end."""

from __future__ import annotations

from crashlab.lessons.interview.question import GRADED, Question
from crashlab.lessons.interview.question import question as _q

STREAMING: tuple[Question, ...] = (
    _q("q36", "10", "Your agent streams its answer to the user. The worker is killed mid-answer and the durable engine "
                    "runs the model step again. What does the user see, and how do you make it exact?",
       "The engine retries the step, so the user gets the answer.",
       "The retry streams the whole answer again: the user sees half an answer and then the whole one, or, since a "
       "real model words a retry differently, an answer the conversation never recorded. Address every chunk by its "
       "place in the durable record: the turn from the recorded conversation, its index in the reply, and the "
       "reply's id as the attempt; a new attempt withdraws what the screen shows of that turn (one visible restart, "
       "like the one repeated model call); the reader resumes from the client's last offset, never from zero.",
       "Why not skip the chunks of the retry that the user has already seen?",
       ["Nothing is wrong: the retried step's tokens replace the ones the user saw, since the engine records only "
        "the step's result",
        "Each chunk carries its turn, its index and the reply's id; a new attempt withdraws its turn, and the reader "
        "resumes from the client's offset",
        "Skip every chunk of the retry whose index the screen already shows, so the user sees each index once"],
       "B"),  # lesson 10's practice question
    _q("q37", "10", "Temporal's workflow streams deduplicate what a publisher sends by its publisher id and sequence. "
                    "Why does an activity that publishes tokens still publish them twice when it is retried?",
       "Signals are delivered at least once, so duplicates are normal.",
       "The publisher id is a uuid4 made per stream client object, and a retried activity makes a new client: its "
       "batches are a new publisher's, and the dead attempt's stay in the log. Publish from workflow code for "
       "exactly once (replay rebuilds the same log, but nothing is live until the activity returns), or from the "
       "activity with the reply's id in every value and a reader that withdraws a dead attempt's turn.",
       "What does publishing every token from an activity cost the workflow's history?",
       ["Because signals are delivered at least once: a longer batch interval leaves a retry nothing to resend",
        "It does not: replay rebuilds the stream's log and drops every value it has seen before",
        "The publisher id is made afresh for each client object, and a retried activity makes a new client"],
       GRADED),
)

__all__ = ["STREAMING"]
