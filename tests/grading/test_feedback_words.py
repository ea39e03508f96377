"""The check every grading's feedback passes in this suite (tests/feedback_guard.py): what it refuses, what it lets
through. The gradings themselves are the other tests' own; this costs no grading."""

import pytest

from feedback_guard import feedback_problems


@pytest.mark.parametrize("output", [
    "cannot reach the Temporal server at 127.0.0.1:7233 (Failed client connect: ConnectError(Os { code: 11); is it running?",
    "the workflow failed (see /tmp/crashlab-grade-ab12/order_log.py, line 3)",
    "your code raised NotImplementedError: (order_agent.py, line 11)",
    "exit code 1: NotImplementedError:",
    'File "<frozen importlib._bootstrap>", line 1204, in _gcd_import',
    "the answer cell did not run (_notebook_answers.py, line 3)",
    "the agent failed: `undo_key raises",
    "",
    "check failed (requirement [R1] ...): the probe should have died at after:charge_card: NotImplementedError",
    "(no crash): the agent failed (its output is not shown for runs on the reference answers)",
    "lesson 4: 3/12 in 40 s, isolated",
])
def test_misleading_feedback_is_refused(output):
    assert feedback_problems(output)


@pytest.mark.parametrize("output", [
    "passed",
    "check failed (requirement R4): too few keys: activity 8 got activity 2's key [...]",
    "exit code 1: NotImplementedError (order_agent.py, line 11)",
    "not clean -- the exercise asks: \"prove the agent clean\" (expected: 0 duplicates): 1 of the 3 crash points run failed\n"
    "- after:charge_card: 2 charges (1 duplicate)",
    "the agent failed (exit code 1: RuntimeError: the payment service said no [...]",
])
def test_feedback_in_words_passes(output):
    assert feedback_problems(output) == []


@pytest.mark.parametrize("problem, hidden", [
    ("before:model#1: crash point never reached (the agent failed first: exit code 1: X (a.py, line 3))",
     "before:model#1: crash point never reached (the agent failed first: its output is not shown: this check runs "
     "your file with the course's answers to the other exercises)"),
    ("(no crash): the agent failed (exit code 1: NotImplementedError (order_agent.py, line 11))",
     "(no crash): the agent failed (its output is not shown: this check runs your file with the course's answers to "
     "the other exercises)"),
])
def test_an_agent_words_hidden_keep_their_parentheses_paired(problem, hidden):
    from crashlab.grading.checks import without_agent_words

    assert without_agent_words(problem) == hidden
    assert feedback_problems(hidden) == []


@pytest.mark.parametrize("output", [
    "check failed (requirement [R2] the reply (a dict) is returned): {'error': 'NotImplementedError: '}",
    "check failed (requirement [R1] the order finishes): Audit(finished=False, duplicates=0)",
    "check failed: [('charge', None), ('reservation', None)]",
    "check failed (requirement [R3] the key): 'ORD-8842'",
    "check failed (requirement [R3] the count): 2",
    "check failed: <function in your code>",
])
def test_a_check_message_that_is_only_a_value_is_refused(output):
    assert any("only a value" in problem for problem in feedback_problems(output)), feedback_problems(output)


@pytest.mark.parametrize("output", [
    "check failed (requirement [R1] the reply): expected a reply dict with stop_reason 'tool_use', got {'x': 1}",
    "check failed (requirement [R2] one charge): 2 charges: one too many",
    "check failed: audit of ORD-8842: charge x2; model calls 4 (repeated 0); finished True -- 2 charges (1 duplicate)",
])
def test_a_check_message_in_words_that_quotes_a_value_passes(output):
    assert feedback_problems(output) == []
