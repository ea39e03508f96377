"""The interview question bank: what a weak answer sounds like, what a strong one says, the follow-up
to expect, and a multiple-choice self-check per question.

Most questions are graded (lesson 11's exercise 3): their letters are not in the library at all, in any form,
because anything a notebook can import that tells right from wrong lets it try every choice until it is told
"right". Their key is the master's answer cell, which only the grader's judge is handed. The practice
questions (:data:`PRACTICE`, one per lesson) are not graded, and keep a salted hash of their letter, so a
learner can check them (:func:`check`) without the key being printed in plain sight.

:meth:`Question.reveal` shows a question's strong answer and its follow-up: a practice question's at any time, a
graded question's only once the learner has given a letter for it, so that reading the bank top to bottom does not
hand out the self-check's answers before they are given.
"""

from __future__ import annotations

from crashlab.lessons.interview.bank import BANK
from crashlab.lessons.interview.question import GRADED, Question, letter_hash


PRACTICE: tuple[str, ...] = tuple(q.qid for q in BANK if q.answer_hash is not None)


def check(answers: dict[str, str]) -> dict[str, bool | None]:
    """Which of ``answers`` ({qid: letter}) are right: True or False for a practice question, None for a
    graded one (the library cannot tell; grading does). Unknown ids raise, so a typo is not a silent miss."""
    by_id = {q.qid: q for q in BANK}
    unknown = sorted(set(answers) - set(by_id))
    if unknown:
        raise KeyError(f"no such question(s): {unknown}")
    return {qid: None if by_id[qid].answer_hash is None else letter_hash(qid, str(letter)) == by_id[qid].answer_hash
            for qid, letter in answers.items()}


__all__ = ["BANK", "GRADED", "PRACTICE", "Question", "check"]
