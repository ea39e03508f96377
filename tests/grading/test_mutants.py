"""Each exercise's stated requirements have a check that bites: a master with one requirement broken
fails the check of that exercise, and an answer worded differently but right passes it.

Only the judge runs here (the master's checks on the mutant's files, as grading runs them, not
isolated): the notebook's own run and the crash matrices add nothing to what these mutants break, and
full gradings of the same mutants scored below full marks too.
"""

from pathlib import Path

import nbformat
import pytest

from crashlab.course.notebooks import grade_id
from master_files import judge_only

ROOT = Path(__file__).resolve().parents[2]


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

CLAIM = """        cursor = self.db.execute("INSERT INTO calls(key) VALUES (?) ON CONFLICT(key) DO NOTHING", (key,))
        return cursor.rowcount == 1"""
# Claims that look the key up, then write it: right alone, wrong in a race. The check holds every racer at its
# first write until all have come that far, so these lose every time (not only when the scheduler says so).
READ_THEN_INSERT_OR_IGNORE = """        if self.db.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone():
            return False
        self.db.execute("INSERT OR IGNORE INTO calls(key) VALUES (?)", (key,))
        return True"""
READ_THEN_INSERT = READ_THEN_INSERT_OR_IGNORE.replace("INSERT OR IGNORE", "INSERT")
READ_THEN_INSERT_IN_A_DEFERRED_TRANSACTION = """        self.db.execute("BEGIN")
        try:
            free = self.db.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone() is None
            if free:
                self.db.execute("INSERT INTO calls(key) VALUES (?)", (key,))
        finally:
            self.db.execute("COMMIT")
        return free"""
# Atomic claims spelled otherwise: each must pass the forced race too.
ATOMIC_CLAIMS = {
    "insert or ignore": """        return self.db.execute("INSERT OR IGNORE INTO calls(key) VALUES (?)", (key,)).rowcount == 1""",
    "begin immediate": READ_THEN_INSERT_IN_A_DEFERRED_TRANSACTION.replace('"BEGIN"', '"BEGIN IMMEDIATE"'),
    "unique constraint": """        try:
            self.db.execute("INSERT INTO calls(key) VALUES (?)", (key,))
        except sqlite3.IntegrityError:
            return False
        return True""",
}

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
    ("02_idempotent_tools.ipynb", "ex3_ledger", CLAIM, READ_THEN_INSERT_OR_IGNORE, "ex3_ledger_checks",
     "expected 1 email, got 4 -- a claim that reads the key and then writes it lets every racer win"),
    ("02_idempotent_tools.ipynb", "ex3_ledger", CLAIM, READ_THEN_INSERT, "ex3_ledger_checks",
     "3 of the 4 racing processes failed (sqlite3.IntegrityError"),
    ("02_idempotent_tools.ipynb", "ex3_ledger", CLAIM, READ_THEN_INSERT_IN_A_DEFERRED_TRANSACTION, "ex3_ledger_checks",
     "3 of the 4 racing processes failed (sqlite3.OperationalError: database is locked"),
    ("03_langgraph.ipynb", "ex2_order_agent", 'DURABILITY = "sync"', 'DURABILITY = "async"', "ex2_order_agent_checks",
     "DURABILITY is 'async'"),
    ("04_dbos.ipynb", "ex1_steps", 'key = f"{DBOS.workflow_id}:step-{DBOS.step_id}:{name}"',
     'key = f"{DBOS.workflow_id}:{name}"', "ex1_steps_checks", "is the step in the key"),
    ("08_frameworks.ipynb", "ex2_dbos_agent", 'DBOS.step(name="order_agent__tool_call", **TOOL_RETRIES)',
     'DBOS.step(name="order_agent__tool_call")', "ex2_dbos_agent_checks",
     # a check on the reference answers names its requirement and quotes nothing of the run (README, References)
     "check failed (requirement [R5] the tool step retries a passing failure)"),
    ("08_frameworks.ipynb", "ex2_dbos_agent", 'PARALLEL_EXECUTION_MODE = "sequential"',
     'PARALLEL_EXECUTION_MODE = "parallel_ordered_events"', "ex2_dbos_agent_checks",
     "check failed (requirement [R6] the tool calls of one reply run one at a time"),
    ("08_frameworks.ipynb", "ex3_functional", 'else call_key(thread, turn, call)',
     'else f"{thread}/{call[\'id\']}/{call[\'name\']}"', "ex3_functional_checks",
     "a key from its new tool_use id is a new key"),
]
IDS = ["final answer not logged", "a 400 retried", "run_once does not wait", "claim reads then inserts or ignores",
       "claim reads then inserts", "claim reads then inserts in a deferred transaction", "durability async",
       "key without the step", "a DBOS tool step that does not retry", "DBOS tool calls run at once",
       "a functional-API key from the tool_use id"]


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


@pytest.mark.parametrize("claim", ATOMIC_CLAIMS.values(), ids=ATOMIC_CLAIMS.keys())
def test_an_atomic_claim_spelled_otherwise_passes_the_forced_race(claim):
    result = judge_only("02_idempotent_tools.ipynb", "ex3_ledger", CLAIM, claim, "ex3_ledger_checks")
    assert result.score == result.max_score, result.output
