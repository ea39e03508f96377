"""A failed check's words (crashlab.lessons.words): what was expected and what came back, and an exercise whose
placeholder still raises said to be not answered yet rather than quoted."""

import pytest

from crashlab.lessons import expected_got


@pytest.mark.parametrize("got", [{"error": "NotImplementedError: "}, NotImplementedError(),
                                 {"value": None, "error": "NotImplementedError: ask_model"},
                                 "exit code 1: NotImplementedError (order_agent.py, line 11)"])
def test_the_placeholder_still_raising_is_an_exercise_not_answered_yet(got):
    assert expected_got("a reply dict", got) == \
        "expected a reply dict, got NotImplementedError from the placeholder: the exercise is not answered yet"


def test_a_value_comes_back_quoted_and_bounded():
    assert expected_got("status 'done'", {"status": "failed"}) == "expected status 'done', got {'status': 'failed'}"
    long = expected_got("a short reply", {"content": "word " * 200})
    assert long.endswith("[...]") and len(long) < 360
    assert expected_got("a 400", ValueError("no")) == "expected a 400, got ValueError: no"
