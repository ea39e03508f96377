"""A fixture agent: the compensating agent with no idempotency keys on its compensations. Killed after a
refund committed and before it was logged, its resume refunds again: a double refund."""

from compensating_agent import run

from crashlab.agent import agent_main

if __name__ == "__main__":
    agent_main(lambda order_id: run(order_id, keyed=False))
