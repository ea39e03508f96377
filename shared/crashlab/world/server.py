"""The world's HTTP server: the model (Anthropic Messages API), the side-effect services, the admin API.

Run as its own process (``python -m crashlab.world.server``), so killing an agent never touches it.
Standard library only, so it starts in a fraction of a second.

The services and their idempotency keys are in :mod:`crashlab.world.services`; the faults the harness arms
through the admin API (counted ones, a flaky spell, permanent failures per order and tool) in
:mod:`crashlab.world.faults`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from crashlab.crash_points import MODEL, CrashPoint, When
from crashlab.errors import DISK_FULL
from crashlab.order import FAILURE_REASONS, is_order_id
from crashlab.plumbing.diskfull import disk_full, full_disk_message
from crashlab.plumbing.ports import port_number
from crashlab.world import backlog_policy, ledger, policy
from crashlab.world.runscope import RunScope
from crashlab.world.crashes import CrashPlan, CrashSite, Requester
from crashlab.world.faults import Faults, Gate
from crashlab.world.screen import ScreenRoutes
from crashlab.world.services import SERVICES, ServiceRoutes, error_body
from crashlab.world.stream import StreamRoutes, StreamSettings

ADMIN_HEADER = "X-Crashlab-Admin"
ENV_TOKEN = "CRASHLAB_WORLD_TOKEN"

class WorldHandler(ServiceRoutes, StreamRoutes, ScreenRoutes, BaseHTTPRequestHandler):
    server_version = "crashlab-world/1"
    protocol_version = "HTTP/1.1"
    # Replies go out as headers, then body: two small writes. With Nagle on, the body waits for the ACK of the
    # headers, which a client on a kept-alive connection (the SDK's, the harness's) delays by up to 40 ms.
    disable_nagle_algorithm = True

    # --- plumbing -------------------------------------------------------------------------------
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the ledgers are the log

    @property
    def state_dir(self) -> Path:
        return self.server.state_dir

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
        self._send(status, error_body(kind, message))

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
        token = self.server.token
        if token and secrets.compare_digest(self.headers.get(ADMIN_HEADER, ""), token):
            return True
        self._error(403, "permission_error", "admin routes need the world's admin token")
        return False

    def handle_one_request(self):
        """A request whose ledger write met a full disk is answered 507, saying so. Each ledger write is one
        SQLite transaction, rolled back when it fails: what the request changed is there whole or not at all,
        and a resume with the same idempotency keys finds out which. Without this the connection closes
        unanswered, and the agent reports a lost acknowledgement."""
        try:
            super().handle_one_request()
        except Exception as exc:
            if not disk_full(exc, self.state_dir):
                raise
            self._error(507, DISK_FULL, full_disk_message("the world's ledgers cannot be written", exc)
                        + "; each ledger write is all or nothing: free some space, then resume the order")
            self.wfile.flush()

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/health":
            self._send(200, {"ok": True, "pid": os.getpid()})
        elif path.startswith("/_admin/") and not self._admin_allowed():
            return
        elif path == "/_admin/faults":
            self._send(200, {"faults": self.server.faults.all()})
        elif path == "/_admin/flaky":
            self._send(200, self.server.faults.flaky())
        elif path == "/_admin/held":
            self._send(200, {"waiting": self.server.gate.waiting})
        elif path == "/_admin/crash":
            self._send(200, self.server.crashes.state())
        elif path == "/_admin/failures":
            self._send(200, {"failures": self.server.faults.failures()})
        elif path in ("/screen", "/screen/cursor"):
            self._screen_get(path, query)
        elif path == "/_admin/screen":
            self._screen_audit(query)
        elif path == "/_admin/stream":
            self._send(200, self.server.streaming.as_json())
        elif path == "/payments/charges":
            self._list_charges(query)
        elif path == "/inventory/reservations":
            self._list_reservations(query)
        elif path == "/_admin/audit":
            from urllib.parse import parse_qs

            from crashlab.world.backlog_audit import audit_of

            order_id = (parse_qs(query).get("order_id") or [""])[0]
            try:
                self._send(200, audit_of(self.state_dir, order_id).as_json())  # a backlog's: one request, all orders
            except ledger.LedgerError as exc:
                full = disk_full(exc, self.state_dir)
                self._error(507 if full else 500, DISK_FULL if full else "ledger_error", str(exc))
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
        elif self.path in ("/screen/show", "/screen/retract"):
            self._screen_post(self.path, body)
        elif self.path.startswith("/_admin/") and not self._admin_allowed():
            return
        elif self.path == "/_admin/faults":
            self._set_fault(body)
        elif self.path == "/_admin/flaky":
            self._set_flaky(body)
        elif self.path == "/_admin/release":
            self.server.gate.open(body.get("order_id") if isinstance(body, dict) else None)
            self._send(200, {"ok": True})
        elif self.path == "/_admin/failures":
            self._set_failure(body)
        elif self.path == "/_admin/crash":
            self._arm_crash(body)
        elif self.path == "/_admin/stream":
            self._set_streaming(body)
        elif self.path == "/_admin/crash/started":
            leader = body.get("pid") if isinstance(body, dict) else None
            if not (type(leader) is int and leader > 0):
                self._error(400, "invalid_request_error", f"a run's first process is a pid, got {leader!r}")
                return
            self._crashes.started(leader)
            self._send(200, {"ok": True})
        else:
            self._error(404, "not_found_error", f"no route POST {self.path}")

    def _arm_crash(self, body) -> None:
        """``{"point", "order_id", "run"}``: arm a crash point for one order and one run; a null point disarms."""
        point, order_id, run = (body.get(k) if isinstance(body, dict) else None for k in ("point", "order_id", "run"))
        if point is None:
            self._crashes.arm(None)
            self._send(200, {"ok": True})
            return
        try:
            if not (isinstance(point, str) and point):
                raise ValueError(f"point must be a crash point such as before:charge_card, got {point!r}")
            if not is_order_id(order_id):
                raise ValueError(f"order_id must be an order id such as ORD-8842, got {order_id!r}")
            self._crashes.arm(CrashPoint.parse(point), order_id, RunScope.from_json(run))
        except ValueError as exc:
            self._error(400, "invalid_request_error", f"crash point: {exc}")
            return
        self._send(200, {"ok": True})

    def _set_fault(self, body) -> None:
        order_id = body.get("order_id") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            self._error(400, "invalid_request_error", "a fault needs a name")
        elif not (order_id is None or is_order_id(order_id)):
            self._error(400, "invalid_request_error", f"a fault's order_id is an order id or null, got {order_id!r}")
        else:
            self.server.faults.set(body["name"], int(body.get("remaining", 1)), body.get("arg"), order_id)
            self._send(200, {"ok": True})

    def _set_failure(self, body) -> None:
        """``{"order_id", "tool", "reason"}``: make a do step fail for good for one order; ``reason`` null clears
        it (``tool`` null too: every step of the order)."""
        order_id, tool, reason = (body.get(k) if isinstance(body, dict) else None for k in ("order_id", "tool", "reason"))
        if not is_order_id(order_id):
            problem = f"order_id must be an order id such as ORD-8842, got {order_id!r}"
        elif not (tool in FAILURE_REASONS or (tool is None and reason is None)):
            problem = f"tool must be one of {', '.join(FAILURE_REASONS)}, got {tool!r}"
        elif tool is not None and not (reason is None or reason in FAILURE_REASONS[tool]):
            problem = f"{tool} fails with {', '.join(FAILURE_REASONS[tool])}, not {reason!r}"
        else:
            self.server.faults.set_failure(order_id, tool, reason)
            self._send(200, {"ok": True})
            return
        self._error(400, "invalid_request_error", f"permanent failure: {problem}")

    def _set_flaky(self, body) -> None:
        def status(value, none_ok=False):
            return (none_ok and value is None) or (type(value) is int and 500 <= value <= 599)

        seconds = body.get("seconds") if isinstance(body, dict) else None
        if not (isinstance(seconds, (int, float)) and 0 <= seconds < 3600 and status(body.get("status", 503))
                and status(body.get("model_status"), none_ok=True)):
            self._error(400, "invalid_request_error", "flaky needs seconds (0 to 3600), a 5xx status and a 5xx "
                                                      "model_status or null")
            return
        self.server.faults.set_flaky(float(seconds), body.get("status", 503), body.get("model_status"))
        self._send(200, {"ok": True})

    def _flaky(self, model: bool, what: str) -> bool:
        """While the world is flaky, answer this request with a retryable error, having done nothing."""
        status = self.server.faults.flaky_status(model)
        if status is None:
            return False
        kind = "overloaded_error" if model and status == 529 else "api_error"
        self._send(status, error_body(kind, f"{what}: temporarily unavailable ({status}), nothing was done; "
                                             "retry later"), {"Retry-After": "1"})
        return True

    # --- the model ------------------------------------------------------------------------------
    def _messages(self, request) -> None:
        faults: Faults = self.server.faults
        if self._flaky(model=True, what="the model"):  # before it counts as a model call of the run
            return
        at = time.time()
        try:
            messages = policy.normalize_messages(request.get("messages") if isinstance(request, dict) else None)
            request_json = ledger.canonical_json(messages)
        except policy.InvalidRequest as exc:
            self._error(400, "invalid_request_error", str(exc))
            return
        try:  # the order the conversation is about, read as the policy reads it (None: the reply is a 400)
            order_id = policy.order_of(messages)  # a backlog's calls are filed under the backlog
        except policy.InvalidRequest:
            order_id = None
        if self.server.gate.wait(order_id) and self._flaky(model=True, what="the model"):  # held till a fault began
            return
        crash = self._crashes.site(MODEL, order_id, self._requester)
        if self._crash(crash, "before"):
            return
        try:
            body = policy.reply(request, malformed=faults.take("malformed_reply", order_id),
                                parallel=policy.parallel_allowed(request)  # a request that forbids it leaves it armed
                                and faults.take("parallel_tool_use", order_id) is not None)
            status, stop_reason = 200, body["stop_reason"]
        except policy.InvalidRequest as exc:
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
            status, order_id, stop_reason = 400, None, None
        digest = hashlib.sha256(request_json.encode()).hexdigest()
        body = self._worded(request, body, digest)  # unchanged unless streamed with vary_wording on
        summary = status == 200 and backlog_policy.is_summary(messages)  # never the final answer (see the audit)
        conn = ledger.connect(self.state_dir / ledger.MODEL_LEDGER)
        try:
            conn.execute("BEGIN IMMEDIATE")
            earlier = conn.execute(
                "SELECT seq FROM calls WHERE messages_hash = ? AND status = 200 ORDER BY seq LIMIT 1", (digest,)
            ).fetchone()
            conn.execute(
                "INSERT INTO calls(order_id, messages_hash, repeat_of, request, status, stop_reason, reply, pid, at,"
                " summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (order_id, digest, earlier["seq"] if earlier and status == 200 else None,
                 ledger.packed_request(request_json), status, stop_reason, json.dumps(body), self._pid(), at, summary),
            )
            conn.execute("COMMIT")
        finally:
            conn.close()
        if status == 200 and self.streams(request):
            self._stream_reply(body, crash)  # meets the crash point's instants inside the stream
            return
        if status == 200 and self._crash(crash, "after"):
            return
        self._send(status, body)

    @property
    def _crashes(self) -> CrashPlan:
        return self.server.crashes

    @property
    def _requester(self) -> Requester:
        """Who holds this connection, looked up at most once (a handler serves one connection)."""
        if getattr(self, "_requester_found", None) is None:
            self._requester_found = Requester(self.client_address[1], self.server.server_address[1])
        return self._requester_found

    def _crash(self, site: CrashSite, when: When) -> bool:
        """If the point the harness armed, for this request's order and the run that sent it, is met ``when``
        at ``site``, kill the run here and send nothing."""
        if site.fire(when):
            self.close_connection = True
            return True
        return False


_BAD_JSON = object()


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
          key_lease: float = 5.0, key_lifetime: float | None = None, result_bytes: int = 0) -> None:
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ledger.create_all(state_dir)
    server = ThreadingHTTPServer(("127.0.0.1", port), WorldHandler)
    server.daemon_threads = True
    server.state_dir = state_dir  # type: ignore[attr-defined]
    server.faults = Faults(state_dir)  # type: ignore[attr-defined]
    server.gate = Gate()  # type: ignore[attr-defined]
    server.key_lease = key_lease  # type: ignore[attr-defined]
    server.key_lifetime = key_lifetime  # type: ignore[attr-defined]
    server.result_bytes = result_bytes  # type: ignore[attr-defined]  # a backlog order's receipt (backlog_policy)
    server.token = os.environ.pop(ENV_TOKEN, "")  # type: ignore[attr-defined]
    if parent_pid:
        threading.Thread(target=_watch_parent, args=(parent_pid, server), daemon=True).start()
    server.crashes = CrashPlan()  # type: ignore[attr-defined]
    server.streaming = StreamSettings()  # type: ignore[attr-defined]
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
    parser.add_argument("--port", type=port_number, default=0, help="0 (default): any free port")
    parser.add_argument("--ready-file", type=Path)
    parser.add_argument("--parent-pid", type=int)
    parser.add_argument("--key-lease", type=float, default=5.0,
                        help="seconds an idempotency key stays in flight before a retry may take it over")
    parser.add_argument("--key-lifetime", type=float, default=None,
                        help="seconds after its first use that a completed idempotency key is forgotten (default: never)")
    parser.add_argument("--result-bytes", type=int, default=0,
                        help="characters of receipt in a backlog order's tool replies (default 0: none)")
    args = parser.parse_args(argv)
    try:
        serve(args.state.resolve(), args.port, args.ready_file, args.parent_pid, args.key_lease, args.key_lifetime,
              args.result_bytes)
    except KeyboardInterrupt:
        pass
    except ledger.LedgerError as exc:  # a damaged ledger under --keep: one line for the log, not a traceback
        raise SystemExit(f"crashlab world: {exc}") from None
    except OSError as exc:
        raise SystemExit(f"crashlab world: cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None


if __name__ == "__main__":
    main()
