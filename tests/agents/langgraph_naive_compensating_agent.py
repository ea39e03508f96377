"""A fixture agent: the LangGraph compensating agent with no idempotency keys on its compensations. Killed after
a refund committed and before its node's checkpoint was written, its resume runs the node again: a double refund."""

import langgraph_compensating_agent as saga

from crashlab.agent import agent_main

saga.UNDO_KEYED = False

if __name__ == "__main__":
    agent_main(saga.run)
