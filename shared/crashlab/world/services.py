"""The world's side-effect services: payments, inventory and email, each with its SQLite ledger.

Stripe's published ``Idempotency-Key`` semantics:

- no key: every request is a new effect;
- same key, same parameters: the first response is replayed (header ``Idempotent-Replayed: true``);
- same key, other parameters: 400 ``idempotency_error``;
- same key while the first request with it is still in flight: 409 ``idempotency_key_in_use``.

A key is claimed for a lease (``--key-lease``, a few seconds) before the effect; the effect and the key's
completion then commit in one transaction, and only if the claim is still this request's (see
:func:`crashlab.world.ledger.claim_key`). So a world killed between the two leaves no effect and a key
that a retry takes over once the lease has run out, and however slow a request is, a key has one effect.
With ``--key-lifetime`` a completed key is forgotten that many seconds after its first use.

Each do step has an undo step with its own path and key: a refund for a charge, a release for a
reservation, a cancellation for a confirmation. A step told to fail for good for an order
(``World.fail_permanently``) answers 402 or 422 with the reason as the error's type (``card_declined``,
``out_of_stock``, ``address_rejected``) and does nothing; with a key, that answer is the key's, replayed
like any other (a declined charge stays declined under its key).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from crashlab.order import FAILURE_REASONS, PERMANENT_ERRORS
from crashlab.world import ledger
from crashlab.world.backlog_policy import receipt
from crashlab.world.crashes import CrashPlan, CrashSite, Requester

if TYPE_CHECKING:
    from pathlib import Path

    from crashlab.crash_points import When

# path -> (ledger name, tool, effect kind, id prefix, required params and their types)
SERVICES: dict[str, tuple[str, str, str, str, dict[str, Any]]] = {
    "/payments/charges": ("payments", "charge_card", "charge", "ch_", {"order_id": str, "amount": (int, float)}),
    "/inventory/reservations": ("inventory", "reserve_item", "reservation", "rsv_", {"order_id": str, "sku": str}),
    "/email/messages": ("email", "send_confirmation", "confirmation", "em_", {"order_id": str}),
    "/payments/refunds": ("payments", "refund_charge", "refund", "re_", {"order_id": str, "amount": (int, float)}),
    "/inventory/releases": ("inventory", "release_item", "release", "rel_", {"order_id": str, "sku": str}),
    "/email/cancellations": ("email", "send_cancellation", "cancellation", "em_", {"order_id": str}),
}


def error_body(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


class ServiceRoutes:
    """The service routes of :class:`crashlab.world.server.WorldHandler` (a mixin: the handler brings what the
    block below names)."""

    if TYPE_CHECKING:  # what crashlab.world.server.WorldHandler brings
        server: Any    # the world's server: its faults, key lease and lifetime
        headers: Any   # the request's

        @property
        def state_dir(self) -> Path: ...

        @property
        def _crashes(self) -> CrashPlan: ...

        @property
        def _requester(self) -> Requester: ...

        def _send(self, status: int, body: dict, headers: dict | None = None) -> None: ...

        def _error(self, status: int, kind: str, message: str) -> None: ...

        def _crash(self, site: CrashSite, when: When) -> bool: ...

        def _flaky(self, model: bool, what: str) -> bool: ...

        def _pid(self) -> int | None: ...

    def _service(self, path: str, params: Any) -> None:
        ledger_name, tool, kind, prefix, required = SERVICES[path]
        problem = _check_params(params, required)
        if problem:
            self._error(400, "invalid_request_error", f"{tool}: {problem}")
            return
        faults = self.server.faults
        self.server.gate.wait(params["order_id"])  # before anything: a held order's request meets the fault
        if self._flaky(model=False, what=tool):
            return
        refused = faults.take(f"refuse:{tool}", params["order_id"])
        if refused is not None:  # an error before anything happens: a 400 must not be retried, a 503 may be
            code = int(refused or 503)
            self._error(code, "invalid_request_error" if code < 500 else "api_error",
                        f"{tool}: refused ({code}), nothing was done")
            return
        key = self.headers.get("Idempotency-Key")
        if key is not None and not key.strip():
            self._error(400, "invalid_request_error", "Idempotency-Key must not be empty")
            return
        crash = self._crashes.site(tool, params["order_id"], self._requester)
        if self._crash(crash, "before"):
            return
        params_json = ledger.canonical_json(params)
        params_hash = hashlib.sha256(f"{path} {params_json}".encode()).hexdigest()
        conn = ledger.connect(self.state_dir / ledger.SERVICE_LEDGERS[ledger_name])
        try:
            owner = None
            if key is not None:
                claim = ledger.claim_key(conn, key, params_hash, self.server.key_lease, self.server.key_lifetime)
                if not isinstance(claim, str):  # the key was seen before: answer from its row
                    self._answer_seen_key(claim, params_hash, key, tool, params["order_id"], crash)
                    return
                owner = claim
            reason = faults.failure(params["order_id"], tool) if tool in FAILURE_REASONS else None
            if reason is not None:
                self._fail_for_good(conn, tool, reason, params["order_id"], key, owner, params_hash, crash)
                return
            delay = faults.take(f"latency:{tool}", params["order_id"])
            if delay:
                time.sleep(float(delay))
            effect_id = prefix + secrets.token_hex(8)
            response = {"id": effect_id, "object": kind, **params, "status": "succeeded",
                        **receipt(params["order_id"], effect_id, self.server.result_bytes)}  # kept with the key
            effect = {"id": effect_id, "kind": kind, "order_id": params["order_id"], "params": params_json,
                      "idempotency_key": key, "pid": self._pid(), "at": time.time()}
            taken = ledger.record_effect(conn, effect, json.dumps(response), owner)
            if taken is not None:  # our lease ran out and another request took the key: no second effect
                self._answer_seen_key(taken, params_hash, key, tool, params["order_id"], crash)
                return
        finally:
            conn.close()
        if self._crash(crash, "after"):
            return
        if faults.take(f"hold:{tool}", params["order_id"]) is not None:
            self.server.gate.close(params["order_id"])  # closed before the reply leaves: nothing can slip past
        if faults.take(f"lost_ack:{tool}", params["order_id"]) is not None:
            # The effect is committed; the reply never leaves. The client sees a dropped connection.
            self.close_connection = True
            return
        self._send(200, response)

    def _fail_for_good(self, conn: sqlite3.Connection, tool: str, reason: str, order_id: str, key: str | None,
                       owner: str | None, params_hash: str, crash: CrashSite) -> None:
        """Answer a permanent failure: no effect; with a key, the key keeps this answer. ``after:TOOL`` fires
        once the answer is decided (and kept), before it is sent."""
        status = FAILURE_REASONS[tool][reason]
        body = error_body(reason, f"{tool} for {order_id} failed for good ({reason}); nothing was done, and "
                                  "the same request will fail the same way: do not retry it")
        if key is not None:
            taken = ledger.record_effect(conn, None, json.dumps(body), owner, key=key, status=status)
            if taken is not None:
                self._answer_seen_key(taken, params_hash, key, tool, order_id, crash)
                return
        if self._crash(crash, "after"):
            return
        self._send(status, body)

    def _answer_seen_key(self, row: sqlite3.Row, params_hash: str, key: str, tool: str, order_id: str,
                         crash: CrashSite) -> None:
        status, body, headers = self._replay(row, params_hash, key)
        failed_for_good = body.get("error", {}).get("type") in PERMANENT_ERRORS
        if (status == 200 or failed_for_good) and self._crash(crash, "after"):  # the key's answer is committed
            return
        if status == 200 and self.server.faults.take(f"lost_ack:{tool}", order_id) is not None:
            self.close_connection = True  # the replayed reply is lost too
            return
        self._send(status, body, headers)

    @staticmethod
    def _replay(row: sqlite3.Row, params_hash: str, key: str) -> tuple[int, dict, dict]:
        """The answer to a request whose key was seen before: (status, body, headers)."""
        if row["params_hash"] != params_hash:
            return 400, error_body("idempotency_error", f"Idempotency-Key {key!r} was first used with other "
                                   "parameters; a key can only be reused for the identical request."), {}
        if row["state"] == "in_flight":
            return 409, error_body("idempotency_key_in_use", f"a request with Idempotency-Key {key!r} is still "
                                   "being processed; retry later."), {}
        return row["status"], json.loads(row["response"]), {"Idempotent-Replayed": "true"}

    def _list_charges(self, query: str) -> None:
        """``GET /payments/charges?order_id=ORD-…``: the order's charges, oldest first, as Stripe lists them --
        how an agent that lost its key (or outlived its lifetime) finds out whether it charged already."""
        self._list_effects(query, "payments", "charge")

    def _list_reservations(self, query: str) -> None:
        """``GET /inventory/reservations?order_id=ORD-…``: the order's reservations, oldest first -- how a saga
        that never heard whether a reservation happened finds out whether there is one to release."""
        self._list_effects(query, "inventory", "reservation")

    def _list_effects(self, query: str, ledger_name: str, kind: str) -> None:
        order_id = (parse_qs(query).get("order_id") or [""])[0]
        if not order_id:
            self._error(400, "invalid_request_error", f"list {kind}s: the order_id query parameter is required")
            return
        if self._flaky(model=False, what=f"list {kind}s"):
            return
        conn = ledger.connect(self.state_dir / ledger.SERVICE_LEDGERS[ledger_name])
        try:
            rows = conn.execute("SELECT id, params, at FROM effects WHERE kind = ? AND order_id = ?"
                                " ORDER BY seq", (kind, order_id)).fetchall()
        finally:
            conn.close()
        data = [{"id": row["id"], "object": kind, **json.loads(row["params"]), "status": "succeeded",
                 "created": row["at"]} for row in rows]
        self._send(200, {"object": "list", "data": data})


def _check_params(params: Any, required: dict) -> str | None:
    if not isinstance(params, dict):
        return "the request body must be a JSON object"
    for name, types in required.items():
        if name not in params:
            return f"missing parameter {name!r}"
        if not isinstance(params[name], types) or isinstance(params[name], bool):
            return f"parameter {name!r} has the wrong type ({type(params[name]).__name__})"
    extra = set(params) - set(required)
    if extra:
        return f"unknown parameters {sorted(extra)}"
    return None
