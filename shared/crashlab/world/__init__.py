"""The world: everything outside the agent process -- the model server, the payment, inventory and email services,
their ledgers, the crash points they fire and the audit that reads them -- started and stopped from Python or the
CLI through :class:`~crashlab.world.control.World`.

The package, by concern: :mod:`.control` (``World``), :mod:`.server` (the world's own process: the model and the
services, :mod:`.policy` and :mod:`.services`), :mod:`.ledger`, :mod:`.crashes` (crash points fired by the world),
:mod:`.faults`, :mod:`.runscope` (which processes are the run's), :mod:`.audit`, :mod:`.folder`, :mod:`.launch`,
:mod:`.scenes` (a lesson's worlds, one per scene). The names below are imported on first use: the world's server,
which imports this package, never loads the ``World`` it does not need.
"""

from typing import TYPE_CHECKING

from crashlab.plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from crashlab.envnames import ENV_MODEL_URL, ENV_PRIVATE_DIR, ENV_SERVICES_URL, ENV_STATE_DIR
    from crashlab.world.control import KEY_LEASE, World
    from crashlab.world.errors import WorldError
    from crashlab.world.ledger import LedgerError

__getattr__, __dir__ = lazy_exports(globals())
__all__ = ["ENV_MODEL_URL", "ENV_PRIVATE_DIR", "ENV_SERVICES_URL", "ENV_STATE_DIR", "KEY_LEASE", "LedgerError", "World",
           "WorldError"]
