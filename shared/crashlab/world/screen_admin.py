"""What the harness and a lesson ask a :class:`crashlab.world.World` about streaming: how it streams, what the user's
screen shows, and the screen's audit. A mixin of ``World`` (its class brings what the block below names), kept apart
so that the world's life cycle and its streaming grow separately.

    world.streaming(pace=0.06)            # seconds per text delta of a streamed reply (the default is 0.05)
    world.screen("ORD-8842")["text"]      # what the user sees now
    print(world.screen_audit("ORD-8842")) # shown twice, out of order, lost, never recorded, retractions
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from crashlab.order import ORDER_ID, check_order_id
from crashlab.world.errors import WorldError

if TYPE_CHECKING:
    from crashlab.world.screen_audit import ScreenAudit


class ScreenAdmin:
    """The streaming and screen part of :class:`crashlab.world.World`."""

    if TYPE_CHECKING:  # what crashlab.world.World brings
        _token: str
        _stopped: bool
        _scratch: bool

        @property
        def url(self) -> str: ...

        @property
        def ledger_dir(self) -> Path: ...

        def _admin(self, method: str, path: str, **kwargs: Any) -> Any: ...

    def streaming(self, pace: float | None = None, vary_wording: bool | None = None) -> dict:
        """Set how the world streams a reply asked with ``"stream": true`` (None leaves a setting as it is) and return
        the settings: ``pace``, seconds per text delta (0: as fast as the client reads; demonstrations watch at about
        0.06, matrices run at 0.005); ``vary_wording``, a repeated streamed call worded differently each time, as a
        real model's is (off by default). A non-streamed reply never changes."""
        change = {name: value for name, value in (("pace", pace), ("vary_wording", vary_wording)) if value is not None}
        return self._admin("POST", "stream", json=change)

    def screen(self, order_id: str = ORDER_ID) -> dict:
        """What the user's screen shows for ``order_id``: ``{"text": what is on it now, "rows": every show and
        retraction, in order}``. Read from the ledger once the world has stopped."""
        from crashlab.world.screen_ledger import ScreenLedger, replay

        check_order_id(order_id)
        if not self._stopped:
            import httpx  # here, not at the top: the world's server imports this package and never needs it

            try:
                reply = httpx.get(f"{self.url}/screen", params={"order_id": order_id}, timeout=30)
                reply.raise_for_status()
                return reply.json()
            except httpx.HTTPError as exc:
                raise WorldError(f"the world at {self.url} did not show its screen ({type(exc).__name__})") from None
        rows = ScreenLedger(self.kept_ledgers("read its screen")).rows(order_id)
        return {"text": "".join(row["text"] for row in replay(rows)), "rows": rows}

    def screen_audit(self, order_id: str = ORDER_ID) -> ScreenAudit:
        """The screen's audit of ``order_id`` (:mod:`crashlab.world.screen_audit`), judged from the world's ledgers:
        asked of the running world through its admin API, read from the ledger files once it has stopped."""
        from crashlab.world.screen_audit import ScreenAudit, audit_screen

        check_order_id(order_id)
        if self._token and not self._stopped:
            return ScreenAudit.from_json(self._admin("GET", "screen", params={"order_id": order_id}))
        return audit_screen(self.kept_ledgers("audit its screen"), order_id)

    def kept_ledgers(self, what: str) -> Path:
        """The ledger folder of a world that is not answering any more, to read; a one-line WorldError if it was a
        scratch folder, removed when the world stopped (``what``: what the caller was to do, "audit it")."""
        if self._scratch and self._stopped:
            raise WorldError(f"this world ran in a scratch folder, removed when it stopped: {what} before stop(), or "
                             "give World.start a folder to keep its ledgers")
        return self.ledger_dir


__all__ = ["ScreenAdmin"]
