"""The Replayer's verdict, as lesson 5 prints it: the reason whole, never cut inside a word."""

from crashlab.engines.temporal.replay import rejection_reason

SANDBOX = ('RuntimeError: Failed validating workflow: message: "Cannot access datetime.datetime.now.__call__ from '
           'inside a workflow. If this is code from a module not used in a workflow or known to only be used '
           'deterministically from a workflow, mark the import as pass through." (more)')
NONDETERMINISM = ("[TMPRL1100] Nondeterminism error: Activity type of scheduled event 'ask_model' does not match "
                  "activity type of activity command 'check_fraud'")


def test_a_sandbox_refusal_keeps_its_first_sentence():
    assert rejection_reason(SANDBOX) == "Cannot access datetime.datetime.now.__call__ from inside a workflow."


def test_a_nondeterminism_error_is_kept_whole():
    assert rejection_reason(NONDETERMINISM) == NONDETERMINISM


def test_a_long_reason_is_cut_after_a_whole_word():
    reason = rejection_reason("word " * 100, width=50)
    assert len(reason) <= 50 and reason.endswith(" [...]")
    assert set(reason[:-len(" [...]")].split(" ")) == {"word"}  # whole words only
