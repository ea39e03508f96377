"""The user's screen as a world service: what an agent (or its relay) asks to show the user, kept in its own ledger.

The screen is the user's display, not a smart sink. It records every request to show text, in arrival order, with
whatever identity the sender claims -- (turn, chunk, attempt) for live model text: the reply's place in the
conversation, the text delta's index in it, the reply's message id; or (stream, offset) for a value read from an
engine's durable stream -- and never deduplicates, so every mistake of a relay is in its ledger, for
:mod:`crashlab.world.screen_audit` to judge. A retraction withdraws what the screen shows for one turn (in a UI,
the answer bubble is replaced: "regenerating..."). A reader that resumes asks the screen's cursor where the user
stands, as a browser's EventSource reconnects with the last event id it holds.

Routes (agent-facing, like the services; the audit is on the admin API, see :mod:`crashlab.world.server`):

- ``POST /screen/show`` ``{"order_id", "text", "turn"?, "chunk"?, "attempt"?, "stream"?, "offset"?}`` -> ``{"seq"}``
- ``POST /screen/retract`` ``{"order_id", "turn"}`` -> ``{"seq"}`` (a turn that shows nothing: recorded all the same)
- ``GET /screen/cursor?order_id=&stream=`` -> ``{"turns": {turn: last chunk shown}, "attempts": {turn: attempt},
  "next_offset": one past the highest offset of ``stream`` shown}``
- ``GET /screen?order_id=`` -> ``{"text": what the user sees now, "rows": [every row]}``
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from crashlab.order import is_order_id
from crashlab.world import ledger
from crashlab.world.screen_audit import audit_screen
from crashlab.world.screen_ledger import ScreenLedger, check_show, cursor, replay


class ScreenRoutes:
    """The screen's routes of :class:`crashlab.world.server.WorldHandler` (a mixin: the handler brings what the
    block below names)."""

    if TYPE_CHECKING:  # what crashlab.world.server.WorldHandler brings
        @property
        def state_dir(self) -> Path: ...

        def _send(self, status: int, body: dict, headers: dict | None = None) -> None: ...

        def _error(self, status: int, kind: str, message: str) -> None: ...

        def _pid(self) -> int | None: ...

    @property
    def screen(self) -> ScreenLedger:
        return ScreenLedger(self.state_dir)

    def _screen_post(self, path: str, body: Any) -> None:
        kind = "show" if path == "/screen/show" else "retract"
        problem = check_show(body, kind)
        if problem:
            self._error(400, "invalid_request_error", f"screen {kind}: {problem}")
            return
        self._send(200, {"seq": self.screen.record(kind, body, self._pid())})

    def _screen_get(self, path: str, query: str) -> None:
        args = {name: values[0] for name, values in parse_qs(query).items()}
        order_id = args.get("order_id")
        if not is_order_id(order_id):
            self._error(400, "invalid_request_error", f"screen: order_id must be an order id, got {order_id!r}")
            return
        rows = self.screen.rows(str(order_id))
        if path == "/screen/cursor":
            self._send(200, cursor(rows, args.get("stream")))
        else:
            self._send(200, {"text": "".join(row["text"] for row in replay(rows)), "rows": rows})


    def _screen_audit(self, query: str) -> None:
        """The admin route: the screen's audit of one order (:mod:`crashlab.world.screen_audit`), as JSON."""
        order_id = (parse_qs(query).get("order_id") or [""])[0]
        if not is_order_id(order_id):
            self._error(400, "invalid_request_error", f"screen audit: order_id must be an order id, got {order_id!r}")
            return
        try:
            self._send(200, audit_screen(self.state_dir, order_id).as_json())
        except ledger.LedgerError as exc:
            self._error(500, "ledger_error", str(exc))


__all__ = ["ScreenRoutes"]
