"""The interview bank: well-formed, covering every lesson, and its self-check tells right from wrong for the
practice questions (the graded ones' key is the master's: see tests/grading/test_fair_by_exercise.py)."""

from pathlib import Path

import pytest

from crashlab.lessons import interview
from master_files import master_value

KEY = master_value(Path(__file__).resolve().parents[2] / "solutions" / "09_side_by_side.ipynb", "ex3_self_check",
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
    assert {q.lesson for q in interview.BANK} >= {"1", "2", "3", "4", "5", "6", "7", "8", "9"}
    text = " ".join(q.question + " " + q.strong for q in interview.BANK).lower()
    for topic in ("compensat", "continue-as-new", "zombie", "tool_use blocks", "forget idempotency keys", "page cache",
                  "@task", "one database transaction", "sticky_queue_schedule_to_start_timeout",
                  "virtual object", "awakeable", "push", "deployment it started on", "stripe-should-retry",
                  "datasource transaction", "is_continue_as_new_suggested", "inactivity_timeout", "cannot itself be "
                  "cancelled", "holds the object's key", "must refuse with a 400", "does not derive idempotency keys",
                  "turnstile", "auto_wrap_tools"):
        assert topic in text, f"no question teaches {topic!r}"


def test_the_right_answers_are_not_all_in_one_position():
    assert set(KEY) == {q.qid for q in interview.BANK}
    assert len(set(KEY.values())) == 3, KEY


def test_the_length_of_a_choice_does_not_give_the_answer_away():
    """A learner who picks the longest (or the shortest) choice every time should not pass the self-check: the
    right answer may be the longest or the shortest in at most a third of the questions."""
    longest, shortest = [], []
    for q in interview.BANK:
        lengths = [len(choice) for choice in q.choices]
        right = lengths["ABC".index(KEY[q.qid])]
        if right == max(lengths):
            longest.append(q.qid)
        if right == min(lengths):
            shortest.append(q.qid)
    third = len(interview.BANK) / 3
    assert len(longest) <= third, f"the right choice is the longest in {len(longest)} questions: {longest}"
    assert len(shortest) <= third, f"the right choice is the shortest in {len(shortest)} questions: {shortest}"


def test_an_unknown_question_is_a_clear_error():
    with pytest.raises(KeyError, match="no such question"):
        interview.check({"q99": "A"})
