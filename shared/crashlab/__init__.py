"""crashlab: the course library for *Durable execution for AI agents*.

The library is split by concern:

- :mod:`crashlab.world`    -- everything outside the agent: the model server, the payment,
                              inventory and email services, and their ledgers.
- :mod:`crashlab.world.audit`    -- reads the world's ledgers and reports duplicates and repeated calls.
- :mod:`crashlab.agent`    -- what an agent file imports: the order task, the model client and the
                              tool client, both of which carry the crash points.
- :mod:`crashlab.harness`  -- runs an agent file, kills it at a crash point, resumes it in a new
                              process, and audits the world.
- :mod:`crashlab.report.plots`    -- timelines and matrices as pictures.
- :mod:`crashlab.grading`  -- builds student notebooks from the masters and grades submissions.
- :mod:`crashlab.cli`      -- the ``crashlab`` command.
"""

from crashlab.order import ORDER_ID, AMOUNT, SKU, order_task
from crashlab.world import World

__all__ = ["ORDER_ID", "AMOUNT", "SKU", "order_task", "World"]
__version__ = "0.1.0"
