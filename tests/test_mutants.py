"""Each exercise's stated requirements have a check that bites: a master with one requirement broken
fails the check of that exercise, and an answer worded differently but right passes it.

Only the judge runs here (the master's checks on the mutant's files, as grading runs them, not
isolated): the notebook's own run and the crash matrices add nothing to what these mutants break, and
full gradings of the same mutants (in the closing notes of issue 12) scored below full marks too.
"""

from pathlib import Path

import nbformat
import pytest

from crashlab.grading.notebooks import grade_id
from master_files import judge_only

ROOT = Path(__file__).resolve().parents[1]


RETRY_REWORDED = '''    attempt = 0
    while True:
        attempt += 1
        try:
            return call_tool(name, args, idempotency_key=key)
        except ToolCallFailed as failure:
            if failure.status is not None and 400 <= failure.status < 500 and failure.status != 409:
                raise
            if attempt >= attempts:
                raise
            time.sleep(0.02)'''

MUTANTS = [
    # (master, answer cell, old, new, the check that must fail, words its feedback must hold -- so a check
    # that fails for some other reason, say a folder the notebook would have made, does not pass for it)
    ("01_naive_event_log.ipynb", "ex3_logged_agent",
     '                append_event(log, {"type": "final", "content": content})\n', "", "ex3_logged_agent_checks",
     "is the final answer logged"),
    ("02_idempotent_tools.ipynb", "ex2_retry", "if not exc.retryable or attempt == attempts - 1:",
     "if attempt == attempts - 1:", "ex2_retry_checks", "a 400 was sent again"),
    ("02_idempotent_tools.ipynb", "ex3_ledger", "        deadline = time.monotonic() + self.wait",
     "        return self.recorded(key)\n        deadline = time.monotonic() + self.wait", "ex3_ledger_checks",
     "a process that loses the claim waits"),
    ("03_langgraph.ipynb", "ex2_order_agent", 'DURABILITY = "sync"', 'DURABILITY = "async"', "ex2_order_agent_checks",
     "DURABILITY is 'async'"),
    ("04_dbos.ipynb", "ex1_steps", 'key = f"{DBOS.workflow_id}:step-{DBOS.step_id}:{name}"',
     'key = f"{DBOS.workflow_id}:{name}"', "ex1_steps_checks", "is the step in the key"),
]
IDS = ["final answer not logged", "a 400 retried", "run_once does not wait", "durability async", "key without the step"]


@pytest.mark.parametrize("master, answer, old, new, check, why", MUTANTS, ids=IDS)
def test_a_broken_requirement_fails_its_check(master, answer, old, new, check, why):
    result = judge_only(master, answer, old, new, check)
    assert result.name == check and result.score == 0, f"{check} passed a mutant: {result.output}"
    assert why in result.output, f"{check} failed for another reason than the mutation: {result.output}"


def test_a_retry_worded_differently_but_right_passes():
    old = next(c for c in nbformat.read(ROOT / "solutions" / "02_idempotent_tools.ipynb", as_version=4).cells
               if grade_id(c) == "ex2_retry").source
    body = old[old.index("    for attempt in range(attempts):"):old.index("    # END SOLUTION")].rstrip("\n")
    result = judge_only("02_idempotent_tools.ipynb", "ex2_retry", body, RETRY_REWORDED, "ex2_retry_checks")
    assert result.score == result.max_score, result.output
