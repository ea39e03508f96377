"""A fixture agent: the DBOS compensating agent with no idempotency keys on its compensations. Killed after a
refund committed and before DBOS journalled the step, its recovery runs the step again: a double refund."""

import dbos_compensating_agent as saga

from crashlab.agent import agent_main

saga.UNDO_KEYED = False

if __name__ == "__main__":
    agent_main(saga.run)
