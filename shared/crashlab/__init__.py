"""crashlab: the course library for *Durable execution for AI agents*.

The library is split by concern (the README's "Layout" draws the tree):

- :mod:`crashlab.world`    -- everything outside the agent: the model server, the payment,
                              inventory and email services, their ledgers, the crash points they fire, the audit.
- :mod:`crashlab.agent`    -- what an agent file imports: the order task, the model client and the
                              tool client.
- :mod:`crashlab.engines`  -- the durable-execution engines: one folder and one registry entry each.
- :mod:`crashlab.harness`  -- runs an agent file, kills it at a crash point, resumes it in a new
                              process, and audits the world.
- :mod:`crashlab.lessons`  -- what a lesson notebook imports.
- :mod:`crashlab.report`   -- timelines and matrices as pictures, and the demo.
- :mod:`crashlab.grading`  -- builds student notebooks from the masters and grades submissions.
- :mod:`crashlab.cli`      -- the ``crashlab`` command.

A program imports ``crashlab``; its names are imported on first use, so an agent process, which imports
``crashlab.agent`` (and so this package), loads nothing of the world.
"""

from typing import TYPE_CHECKING

from crashlab.plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from crashlab.order import AMOUNT, ORDER_ID, SKU, order_task
    from crashlab.world.control import World

__getattr__, __dir__ = lazy_exports(globals())
__all__ = ["ORDER_ID", "AMOUNT", "SKU", "order_task", "World"]
__version__ = "0.1.0"
