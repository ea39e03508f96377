"""A failed check's words (crashlab.lessons.words): what was expected and what came back, and an exercise whose
placeholder still raises said to be not answered yet rather than quoted."""

import pytest

from crashlab.harness.runs import ProcessRun
from crashlab.lessons import expected_got, stopped_before


@pytest.mark.parametrize("got", [{"error": "NotImplementedError: "}, NotImplementedError(),
                                 {"value": None, "error": "NotImplementedError: ask_model"}])
def test_the_placeholder_still_raising_is_an_exercise_not_answered_yet(got):
    assert expected_got("a reply dict", got) == ("not answered yet: your code still raises NotImplementedError, the "
                                                 "placeholder's exception; the check expected a reply dict")


TRACEBACK = """Traceback (most recent call last):
  File "/usr/lib/python3.11/runpy.py", line 198, in _run_module_as_main
  File "/tmp/crashlab-grade-x1/one_turn.py", line 30, in <module>
  File "/tmp/crashlab-grade-x1/dbos_steps.py", line 14, in ask_model
    raise NotImplementedError()
NotImplementedError
"""


@pytest.mark.parametrize("got", ["exit code 1: NotImplementedError (order_agent.py, line 11)",
                                 ProcessRun(pid=7, returncode=1, started=0, ended=1, stdout="", stderr=TRACEBACK)])
def test_the_placeholder_in_an_agent_says_the_learners_file_and_line_first(got):
    words = expected_got("a run killed at after:charge_card", got)
    assert words.startswith("not answered yet: your code still raises NotImplementedError ("), words
    assert words.endswith("the check expected a run killed at after:charge_card"), words
    assert "(order_agent.py, line 11)" in words or "(dbos_steps.py, line 14)" in words, words
    assert "/tmp" not in words


def test_an_agent_that_stopped_on_its_placeholder_says_so_first_and_where():
    words = stopped_before("waiting for approval", 1, TRACEBACK.replace("dbos_steps.py", "approval.py"))
    assert words == ("not answered yet: your code still raises NotImplementedError (approval.py, line 14), the "
                     "placeholder's exception; the agent stopped (exit code 1) before the order reached "
                     "'waiting for approval'")
    other = stopped_before("waiting for approval", 1, TRACEBACK.replace("NotImplementedError", "KeyError: 'id'"))
    assert other.startswith("the agent exited before the order reached 'waiting for approval': exit code 1: "
                            "KeyError: 'id'"), other


def test_an_agent_run_that_failed_is_told_by_how_it_ended_not_its_whole_output():
    run = ProcessRun(pid=7, returncode=1, started=0, ended=1, stdout="lots\n" * 500,
                     stderr=TRACEBACK.replace("NotImplementedError", "ValueError: no key"))
    assert expected_got("a run killed at after:charge_card", run) == \
        "expected a run killed at after:charge_card, got exit code 1: ValueError: no key (dbos_steps.py, line 14)"


def test_a_value_comes_back_quoted_and_bounded():
    assert expected_got("status 'done'", {"status": "failed"}) == "expected status 'done', got {'status': 'failed'}"
    long = expected_got("a short reply", {"content": "word " * 200})
    assert long.endswith("[...]") and len(long) < 360
    assert expected_got("a 400", ValueError("no")) == "expected a 400, got ValueError: no"
