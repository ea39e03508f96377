"""The world's HTTP server: the model (Anthropic Messages API) and the three side-effect services.

Run as its own process (``python -m crashlab.world.server``), so killing an agent never touches it.
Standard library only, so it starts in a fraction of a second.

Services follow Stripe's published ``Idempotency-Key`` semantics:

- no key: every request is a new effect;
- same key, same parameters: the first response is replayed (header ``Idempotent-Replayed: true``);
- same key, other parameters: 400 ``idempotency_error``;
- same key while the first request with it is still in flight: 409 ``idempotency_key_in_use``.

A key is claimed for a lease (``--key-lease``, a few seconds) before the effect; the effect and the key's
completion then commit in one transaction, and only if the claim is still this request's (see
:func:`crashlab.world.ledger.claim_key`). So a world killed between the two leaves no effect and a key
that a retry takes over once the lease has run out, and however slow a request is, a key has one effect.

Faults, armed by the harness through the admin API: counted ones (``refuse:TOOL``, ``latency:TOOL``,
``lost_ack:TOOL``, ``malformed_reply``) and a timed one, *flaky*: until a wall-clock time kept in the control
ledger, every service request is answered 503 and every model request 529, before anything is done.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from crashlab.world import ledger, policy
from crashlab.world.crashes import CrashPlan

ADMIN_HEADER = "X-Crashlab-Admin"
ENV_TOKEN = "CRASHLAB_WORLD_TOKEN"

# path -> (ledger name, tool, effect kind, id prefix, required params and their types)
SERVICES = {
    "/payments/charges": ("payments", "charge_card", "charge", "ch_", {"order_id": str, "amount": (int, float)}),
    "/inventory/reservations": ("inventory", "reserve_item", "reservation", "rsv_", {"order_id": str, "sku": str}),
    "/email/messages": ("email", "send_confirmation", "confirmation", "em_", {"order_id": str}),
}


class Faults:
    """Faults the world injects on request, counted down in the control ledger so they survive
    the agent's crash and fire exactly as many times as asked."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / ledger.CONTROL_LEDGER
        self.lock = threading.Lock()

    def set(self, name: str, remaining: int = 1, arg: str | None = None) -> None:
        with self.lock:
            conn = ledger.connect(self.path)
            try:
                conn.execute("INSERT OR REPLACE INTO faults(name, remaining, arg) VALUES (?, ?, ?)",
                             (name, remaining, arg))
            finally:
                conn.close()

    def take(self, name: str) -> str | None:
        """Consume one firing of fault ``name``; return its argument ('' if none), or None if unarmed."""
        with self.lock:
            conn = ledger.connect(self.path)
            try:
                row = conn.execute("SELECT remaining, arg FROM faults WHERE name = ?", (name,)).fetchone()
                if row is None or row["remaining"] <= 0:
                    return None
                conn.execute("UPDATE faults SET remaining = remaining - 1 WHERE name = ?", (name,))
                return row["arg"] or ""
            finally:
                conn.close()

    def all(self) -> list[dict]:
        conn = ledger.connect(self.path)
        try:
            return [dict(r) for r in conn.execute("SELECT * FROM faults ORDER BY name")]
        finally:
            conn.close()

    # A flaky world: for a time, every request fails with a retryable status and does nothing.
    def set_flaky(self, seconds: float, status: int, model_status: int | None) -> None:
        with self.lock:
            conn = ledger.connect(self.path)
            try:
                conn.execute("INSERT INTO flaky(id, until, status, model_status) VALUES (1, ?, ?, ?) ON CONFLICT(id)"
                             " DO UPDATE SET until = excluded.until, status = excluded.status,"
                             " model_status = excluded.model_status", (time.time() + seconds, status, model_status))
            finally:
                conn.close()

    def flaky_status(self, model: bool) -> int | None:
        """The status to answer this request with, if the world is flaky now (counted); else None."""
        with self.lock:
            conn = ledger.connect(self.path)
            try:
                row = conn.execute("SELECT until, status, model_status FROM flaky WHERE id = 1").fetchone()
                status = None if row is None or row["until"] <= time.time() else \
                    row["model_status"] if model else row["status"]
                if status is not None:
                    conn.execute("UPDATE flaky SET refused = refused + 1 WHERE id = 1")
                return status
            finally:
                conn.close()

    def flaky(self) -> dict:
        conn = ledger.connect(self.path)
        try:
            row = conn.execute("SELECT until, refused FROM flaky WHERE id = 1").fetchone()
            return {"seconds_left": max(0.0, row["until"] - time.time()) if row else 0.0,
                    "refused": row["refused"] if row else 0}  # since the world's ledgers were made
        finally:
            conn.close()


class WorldHandler(BaseHTTPRequestHandler):
    server_version = "crashlab-world/1"
    protocol_version = "HTTP/1.1"

    # --- plumbing -------------------------------------------------------------------------------
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the ledgers are the log

    @property
    def state_dir(self) -> Path:
        return self.server.state_dir  # type: ignore[attr-defined]

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, _error_body(kind, message))

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _BAD_JSON

    def _pid(self) -> int | None:
        try:
            return int(self.headers.get("X-Crashlab-Pid", ""))
        except ValueError:
            return None

    # --- routes -------------------------------------------------------------------------------
    def _admin_allowed(self) -> bool:
        """Admin routes (faults, crash points, the audit) are for the harness only: they need the
        token the world was started with, which no agent is given."""
        token = self.server.token  # type: ignore[attr-defined]
        if token and secrets.compare_digest(self.headers.get(ADMIN_HEADER, ""), token):
            return True
        self._error(403, "permission_error", "admin routes need the world's admin token")
        return False

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/health":
            self._send(200, {"ok": True, "pid": os.getpid()})
        elif path.startswith("/_admin/") and not self._admin_allowed():
            return
        elif path == "/_admin/faults":
            self._send(200, {"faults": self.server.faults.all()})  # type: ignore[attr-defined]
        elif path == "/_admin/flaky":
            self._send(200, self.server.faults.flaky())  # type: ignore[attr-defined]
        elif path == "/_admin/crash":
            self._send(200, self.server.crashes.state())  # type: ignore[attr-defined]
        elif path == "/_admin/audit":
            from urllib.parse import parse_qs

            from crashlab.audit import audit

            order_id = (parse_qs(query).get("order_id") or [""])[0]
            try:
                self._send(200, audit(self.state_dir, order_id).as_json())
            except ledger.LedgerError as exc:
                self._error(500, "ledger_error", str(exc))
        else:
            self._error(404, "not_found_error", f"no route GET {self.path}")

    def do_POST(self):
        body = self._body()
        if body is _BAD_JSON:
            self._error(400, "invalid_request_error", "the request body is not valid JSON")
        elif self.path == "/v1/messages":
            self._messages(body)
        elif self.path in SERVICES:
            self._service(self.path, body)
        elif self.path.startswith("/_admin/") and not self._admin_allowed():
            return
        elif self.path == "/_admin/faults":
            self._set_fault(body)
        elif self.path == "/_admin/flaky":
            self._set_flaky(body)
        elif self.path == "/_admin/crash":
            point = body.get("point") if isinstance(body, dict) else None
            self.server.crashes.arm(point if isinstance(point, str) and point else None)  # type: ignore[attr-defined]
            self._send(200, {"ok": True})
        else:
            self._error(404, "not_found_error", f"no route POST {self.path}")

    def _set_fault(self, body) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            self._error(400, "invalid_request_error", "a fault needs a name")
            return
        self.server.faults.set(body["name"], int(body.get("remaining", 1)), body.get("arg"))  # type: ignore[attr-defined]
        self._send(200, {"ok": True})

    def _set_flaky(self, body) -> None:
        def status(value, none_ok=False):
            return (none_ok and value is None) or (type(value) is int and 500 <= value <= 599)

        seconds = body.get("seconds") if isinstance(body, dict) else None
        if not (isinstance(seconds, (int, float)) and 0 <= seconds < 3600 and status(body.get("status", 503))
                and status(body.get("model_status"), none_ok=True)):
            self._error(400, "invalid_request_error", "flaky needs seconds (0 to 3600), a 5xx status and a 5xx "
                                                      "model_status or null")
            return
        self.server.faults.set_flaky(float(seconds), body.get("status", 503), body.get("model_status"))  # type: ignore[attr-defined]
        self._send(200, {"ok": True})

    def _flaky(self, model: bool, what: str) -> bool:
        """While the world is flaky, answer this request with a retryable error, having done nothing."""
        status = self.server.faults.flaky_status(model)  # type: ignore[attr-defined]
        if status is None:
            return False
        kind = "overloaded_error" if model and status == 529 else "api_error"
        self._send(status, _error_body(kind, f"{what}: temporarily unavailable ({status}), nothing was done; "
                                             "retry later"), {"Retry-After": "1"})
        return True

    # --- the model ------------------------------------------------------------------------------
    def _messages(self, request) -> None:
        faults: Faults = self.server.faults  # type: ignore[attr-defined]
        if self._flaky(model=True, what="the model"):  # before it counts as a model call of the run
            return
        at = time.time()
        try:
            messages = policy.normalize_messages(request.get("messages") if isinstance(request, dict) else None)
            request_json = ledger.canonical_json(messages)
        except policy.InvalidRequest as exc:
            self._error(400, "invalid_request_error", str(exc))
            return
        op = self._crashes.next_model_op()
        if self._crash("before", op):
            return
        try:
            body = policy.reply(request, malformed=faults.take("malformed_reply"))
            status, order_id, stop_reason = 200, policy.order_from(messages)["order_id"], body["stop_reason"]
        except policy.InvalidRequest as exc:
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
            status, order_id, stop_reason = 400, None, None
        digest = hashlib.sha256(request_json.encode()).hexdigest()
        conn = ledger.connect(self.state_dir / ledger.MODEL_LEDGER)
        try:
            conn.execute("BEGIN IMMEDIATE")
            earlier = conn.execute(
                "SELECT seq FROM calls WHERE messages_hash = ? AND status = 200 ORDER BY seq LIMIT 1", (digest,)
            ).fetchone()
            conn.execute(
                "INSERT INTO calls(order_id, messages_hash, repeat_of, request, status, stop_reason, reply, pid, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (order_id, digest, earlier["seq"] if earlier and status == 200 else None, request_json, status,
                 stop_reason, json.dumps(body), self._pid(), at),
            )
            conn.execute("COMMIT")
        finally:
            conn.close()
        if status == 200 and self._crash("after", op):
            return
        self._send(status, body)

    @property
    def _crashes(self) -> CrashPlan:
        return self.server.crashes  # type: ignore[attr-defined]

    def _crash(self, when: str, op: str) -> bool:
        """If the harness armed ``when:op``, kill the requesting process here and send nothing."""
        if self._crashes.fire(when, op, self.client_address[1], self.server.server_address[1]):
            self.close_connection = True
            return True
        return False

    # --- the services -----------------------------------------------------------------------------
    def _service(self, path: str, params) -> None:
        ledger_name, tool, kind, prefix, required = SERVICES[path]
        problem = _check_params(params, required)
        if problem:
            self._error(400, "invalid_request_error", f"{tool}: {problem}")
            return
        faults: Faults = self.server.faults  # type: ignore[attr-defined]
        if self._flaky(model=False, what=tool):
            return
        refused = faults.take(f"refuse:{tool}")
        if refused is not None:  # an error before anything happens: a 400 must not be retried, a 503 may be
            code = int(refused or 503)
            self._error(code, "invalid_request_error" if code < 500 else "api_error",
                        f"{tool}: refused ({code}), nothing was done")
            return
        key = self.headers.get("Idempotency-Key")
        if key is not None and not key.strip():
            self._error(400, "invalid_request_error", "Idempotency-Key must not be empty")
            return
        if self._crash("before", tool):
            return
        params_json = ledger.canonical_json(params)
        params_hash = hashlib.sha256(f"{path} {params_json}".encode()).hexdigest()
        conn = ledger.connect(self.state_dir / ledger.SERVICE_LEDGERS[ledger_name])
        try:
            owner = None
            if key is not None:
                claim = ledger.claim_key(conn, key, params_hash, self.server.key_lease)  # type: ignore[attr-defined]
                if not isinstance(claim, str):  # the key was seen before: answer from its row
                    self._answer_seen_key(claim, params_hash, key, tool)
                    return
                owner = claim
            delay = faults.take(f"latency:{tool}")
            if delay:
                time.sleep(float(delay))
            effect_id = prefix + secrets.token_hex(8)
            response = {"id": effect_id, "object": kind, **params, "status": "succeeded"}
            effect = {"id": effect_id, "kind": kind, "order_id": params["order_id"], "params": params_json,
                      "idempotency_key": key, "pid": self._pid(), "at": time.time()}
            taken = ledger.record_effect(conn, effect, json.dumps(response), owner)
            if taken is not None:  # our lease ran out and another request took the key: no second effect
                self._answer_seen_key(taken, params_hash, key, tool)
                return
        finally:
            conn.close()
        if self._crash("after", tool):
            return
        if faults.take(f"lost_ack:{tool}") is not None:
            # The effect is committed; the reply never leaves. The client sees a dropped connection.
            self.close_connection = True
            return
        self._send(200, response)

    def _answer_seen_key(self, row: sqlite3.Row, params_hash: str, key: str, tool: str) -> None:
        status, body, headers = self._replay(row, params_hash, key)
        if status == 200 and self._crash("after", tool):
            return
        if status == 200 and self.server.faults.take(f"lost_ack:{tool}") is not None:  # type: ignore[attr-defined]
            self.close_connection = True  # the replayed reply is lost too
            return
        self._send(status, body, headers)

    @staticmethod
    def _replay(row: sqlite3.Row, params_hash: str, key: str) -> tuple[int, dict, dict]:
        """The answer to a request whose key was seen before: (status, body, headers)."""
        if row["params_hash"] != params_hash:
            return 400, _error_body("idempotency_error", f"Idempotency-Key {key!r} was first used with other "
                                    "parameters; a key can only be reused for the identical request."), {}
        if row["state"] == "in_flight":
            return 409, _error_body("idempotency_key_in_use", f"a request with Idempotency-Key {key!r} is still "
                                    "being processed; retry later."), {}
        return row["status"], json.loads(row["response"]), {"Idempotent-Replayed": "true"}


_BAD_JSON = object()


def _error_body(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _check_params(params, required: dict) -> str | None:
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


def _watch_parent(parent_pid: int, server: ThreadingHTTPServer) -> None:
    """Stop the world when the process that started it is gone (a killed kernel, a crashed test)."""
    while True:
        time.sleep(0.5)
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            server.shutdown()
            return
        except PermissionError:
            pass


def serve(state_dir: Path, port: int = 0, ready_file: Path | None = None, parent_pid: int | None = None,
          key_lease: float = 5.0) -> None:
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ledger.create_all(state_dir)
    server = ThreadingHTTPServer(("127.0.0.1", port), WorldHandler)
    server.daemon_threads = True
    server.state_dir = state_dir  # type: ignore[attr-defined]
    server.faults = Faults(state_dir)  # type: ignore[attr-defined]
    server.key_lease = key_lease  # type: ignore[attr-defined]
    server.token = os.environ.pop(ENV_TOKEN, "")  # type: ignore[attr-defined]
    protected = {os.getpgid(0)}
    if parent_pid:
        try:
            protected.add(os.getpgid(parent_pid))
        except ProcessLookupError:
            pass
        threading.Thread(target=_watch_parent, args=(parent_pid, server), daemon=True).start()
    server.crashes = CrashPlan(protected)  # type: ignore[attr-defined]
    ready = json.dumps({"port": server.server_address[1], "pid": os.getpid()})
    if ready_file:
        tmp = ready_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps({**json.loads(ready), "token": server.token}))  # type: ignore[attr-defined]
        os.replace(tmp, ready_file)
    print(ready, flush=True)  # the parent waits for this line
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if ready_file:
            ready_file.unlink(missing_ok=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Serve the course's world (model + services) on 127.0.0.1.")
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", type=Path)
    parser.add_argument("--parent-pid", type=int)
    parser.add_argument("--key-lease", type=float, default=5.0,
                        help="seconds an idempotency key stays in flight before a retry may take it over")
    args = parser.parse_args(argv)
    try:
        serve(args.state.resolve(), args.port, args.ready_file, args.parent_pid, args.key_lease)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise SystemExit(f"crashlab world: cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None


if __name__ == "__main__":
    main()
