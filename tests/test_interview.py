"""The interview bank: well-formed, covering every lesson, and its self-check tells right from wrong for the
practice questions (the graded ones' key is the master's: see tests/test_fair_by_exercise.py)."""

from pathlib import Path

import pytest

from crashlab.lessons import interview
from master_files import master_value

KEY = master_value(Path(__file__).resolve().parents[1] / "solutions" / "08_side_by_side.ipynb", "ex3_self_check",
                   "my_answers")


def test_every_question_is_complete_and_its_choices_distinct():
    ids = [q.qid for q in interview.BANK]
    assert len(ids) == len(set(ids))
    for q in interview.BANK:
        assert q.question and q.weak and q.strong and q.follow_up, q.qid
        assert len(q.choices) == 3 and len(set(q.choices)) == 3, q.qid
        assert q.weak not in q.choices, f"{q.qid}: the weak answer should be a mistake people make, not a choice"
        assert KEY[q.qid] in "ABC"[:len(q.choices)], q.qid
        if q.qid in interview.PRACTICE:
            assert sum(interview.check({q.qid: letter})[q.qid] for letter in "ABC") == 1, q.qid


def test_the_bank_covers_every_lesson_and_the_topics_an_interviewer_asks():
    assert {q.lesson for q in interview.BANK} >= {"1", "2", "3", "4", "5", "6", "7", "8"}
    text = " ".join(q.question + " " + q.strong for q in interview.BANK).lower()
    for topic in ("compensat", "continue-as-new", "zombie", "tool_use blocks", "forget idempotency keys", "page cache",
                  "@task", "one database transaction", "sticky_queue_schedule_to_start_timeout",
                  "virtual object", "awakeable", "push", "deployment it started on"):
        assert topic in text, f"no question teaches {topic!r}"


def test_the_right_answers_are_not_all_in_one_position():
    assert set(KEY) == {q.qid for q in interview.BANK}
    assert len(set(KEY.values())) == 3, KEY


def test_an_unknown_question_is_a_clear_error():
    with pytest.raises(KeyError, match="no such question"):
        interview.check({"q99": "A"})
