"""One question of the interview bank (:mod:`crashlab.lessons.interview`): its words, its choices, and how it shows
and reveals itself. A graded question holds no trace of its letter; a practice question a salted hash of it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from crashlab.plumbing.lines import fit


@dataclass(frozen=True)
class Question:
    qid: str
    lesson: str
    question: str
    weak: str
    strong: str
    follow_up: str
    choices: tuple[str, ...]
    answer_hash: str | None  # None for a graded question: only the master knows its letter

    def show(self) -> str:
        options = "\n".join(fit(f"  {letter}) {text}", indent="   ") for letter, text in zip("ABCD", self.choices))
        return f"{fit(f'[{self.qid}, lesson {self.lesson}] {self.question}')}\n{options}"

    @property
    def graded(self) -> bool:
        return self.answer_hash is None

    def reveal(self, answer: str | None = None) -> str:
        """The weak and the strong answer and the follow-up. A graded question shows them only once ``answer`` is
        one of its letters (the learner's own, given first: ``q.reveal("B")``); a practice question shows them
        either way, and says whether ``answer`` is its strong one when given."""
        letters = "ABCD"[:len(self.choices)]
        letter = answer.strip().upper() if isinstance(answer, str) else None
        if letter is not None and letter not in letters:
            return f"[{self.qid}] {answer!r} is not one of its letters ({', '.join(letters)})"
        if self.graded and letter is None:
            return fit(f"[{self.qid}] graded: answer it first, then reveal with your letter "
                       f"(question.reveal(\"A\"), one of {', '.join(letters)})")
        said = f"  you:    {letter}) {self.choices[letters.index(letter)]}\n" if letter else ""
        if letter and not self.graded:
            right = letter_hash(self.qid, letter) == self.answer_hash
            said += f"          ({'the strong answer' if right else 'not the strong answer'})\n"
        body = f"{said}  weak:   {self.weak}\n  strong: {self.strong}\n  expect: {self.follow_up}"
        return f"{fit(f'[{self.qid}] {self.question}')}\n{fit(body, indent=' ' * 8)}"  # wrapped under the answers


def letter_hash(qid: str, letter: str) -> str:
    """A practice question's letter, salted and hashed: what :func:`crashlab.lessons.interview.check` compares."""
    return hashlib.sha256(f"crashlab-interview:{qid}:{letter.upper()}".encode()).hexdigest()[:16]


GRADED = None  # in place of the letter: a graded question


def question(qid, lesson, words, weak, strong, follow_up, choices, right) -> Question:
    """A question of the bank; ``right`` is a practice question's letter, or :data:`GRADED`."""
    return Question(qid, lesson, words, weak, strong, follow_up, tuple(choices),
                    None if right is GRADED else letter_hash(qid, right))


__all__ = ["GRADED", "Question", "letter_hash", "question"]
