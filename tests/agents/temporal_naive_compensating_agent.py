"""A fixture agent: the Temporal compensating agent with no idempotency keys on its compensations. Killed after
a refund committed and before the worker reported the activity done, the retried activity refunds again."""

import saga_activities
import temporal_compensating_agent as saga

from crashlab.agent import agent_main

saga_activities.UNDO_KEYED = False

if __name__ == "__main__":
    agent_main(saga.run)
