"""The interview bank: well-formed, covering every lesson, and its self-check tells right from wrong."""

import pytest

from crashlab import interview


def test_every_question_is_complete_and_its_choices_distinct():
    ids = [q.qid for q in interview.BANK]
    assert len(ids) == len(set(ids))
    for q in interview.BANK:
        assert q.question and q.weak and q.strong and q.follow_up, q.qid
        assert len(q.choices) == 3 and len(set(q.choices)) == 3, q.qid
        assert q.weak not in q.choices, f"{q.qid}: the weak answer should be a mistake people make, not a choice"
        assert sum(interview.check({q.qid: letter})[q.qid] for letter in "ABC") == 1, q.qid


def test_the_bank_covers_every_lesson_and_the_topics_an_interviewer_asks():
    assert {q.lesson for q in interview.BANK} >= {"1", "2", "3", "4", "5", "6", "7", "8"}
    text = " ".join(q.question + " " + q.strong for q in interview.BANK).lower()
    for topic in ("compensat", "continue-as-new", "zombie", "tool_use blocks", "forget idempotency keys", "page cache",
                  "@task", "one database transaction", "sticky_queue_schedule_to_start_timeout",
                  "virtual object", "awakeable", "push", "deployment it started on"):
        assert topic in text, f"no question teaches {topic!r}"


def test_the_right_answers_are_not_all_in_one_position():
    right = {q.qid: next(letter for letter in "ABC" if interview.check({q.qid: letter})[q.qid]) for q in interview.BANK}
    assert len(set(right.values())) == 3, right


def test_an_unknown_question_is_a_clear_error():
    with pytest.raises(KeyError, match="no such question"):
        interview.check({"q99": "A"})
