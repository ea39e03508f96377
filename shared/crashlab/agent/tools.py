"""The tool client an agent uses: each tool is an HTTP call to one of the world's services, checked against
its schema first (a malformed call never reaches a service), with the idempotency key in a header."""

from __future__ import annotations

import os

import httpx

from crashlab.agent.connection import HOW_TO_START, TLS, one_line
from crashlab.envnames import ENV_SERVICES_URL
from crashlab.errors import MalformedToolCall, ToolCallFailed, WorldNotRunning
from crashlab.order import ALL_TOOL_SCHEMAS

# Seconds to wait for a reply. A request that gets none may still have landed: see ToolCallFailed.
TOOL_TIMEOUT = 30.0

SERVICE_PATHS = {
    "charge_card": "/payments/charges",
    "reserve_item": "/inventory/reservations",
    "send_confirmation": "/email/messages",
    "refund_charge": "/payments/refunds",
    "release_item": "/inventory/releases",
    "send_cancellation": "/email/cancellations",
}


_JSON_TYPES = {"string": (str,), "number": (int, float)}


def validate_tool_call(name, args) -> None:
    """Raise :class:`MalformedToolCall` unless ``name(**args)`` matches a tool's schema exactly (the undo tools
    included)."""
    if name not in ALL_TOOL_SCHEMAS:
        raise MalformedToolCall(f"the model asked for an unknown tool {name!r}; the tools are {sorted(ALL_TOOL_SCHEMAS)}")
    if not isinstance(args, dict):
        raise MalformedToolCall(f"{name}: arguments must be an object, got {type(args).__name__}")
    schema = ALL_TOOL_SCHEMAS[name]
    missing = [key for key in schema["required"] if key not in args]
    if missing:
        raise MalformedToolCall(f"{name}: missing argument(s) {missing}")
    extra = sorted(set(args) - set(schema["properties"]))
    if extra:
        raise MalformedToolCall(f"{name}: unexpected argument(s) {extra}")
    for key, value in args.items():
        expected = schema["properties"][key]["type"]
        if not isinstance(value, _JSON_TYPES[expected]) or isinstance(value, bool):
            raise MalformedToolCall(f"{name}: argument {key!r} should be a {expected}, got {value!r}")


def call_tool(name: str, args: dict, *, idempotency_key: str | None = None) -> dict:
    """Call one side-effecting tool in the world.

    Without ``idempotency_key`` every call is a new effect. With one, the service replays its
    first response to a repeat of the same request (Stripe's semantics).
    """
    validate_tool_call(name, args)
    if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key.strip()):
        raise ValueError(f"{name}: idempotency_key must be a non-empty string, got {idempotency_key!r}")
    base = os.environ.get(ENV_SERVICES_URL)
    if not base:
        raise WorldNotRunning(f"{ENV_SERVICES_URL} is not set, so there are no services to call; {HOW_TO_START}")
    headers = {"X-Crashlab-Pid": str(os.getpid())}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    try:
        reply = httpx.post(base + SERVICE_PATHS[name], json=args, headers=headers, timeout=TOOL_TIMEOUT,
                           verify=TLS)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL):
        raise WorldNotRunning(f"{ENV_SERVICES_URL}={base!r} is not a URL like http://127.0.0.1:8123; "
                              f"{HOW_TO_START}") from None
    except (httpx.ConnectError, httpx.ConnectTimeout):  # nothing was sent
        raise WorldNotRunning(f"cannot reach the services at {base}; {HOW_TO_START}") from None
    except httpx.TimeoutException:
        raise ToolCallFailed(f"{name}: no reply from the service within {TOOL_TIMEOUT:g} s -- the effect may or may "
                             "not have happened") from None
    except httpx.RemoteProtocolError:
        raise ToolCallFailed(f"{name}: the service closed the connection without a reply -- the effect may or "
                             "may not have happened (a lost acknowledgement)") from None
    except httpx.TransportError as exc:  # a reset connection, say: the request may have landed
        raise ToolCallFailed(f"{name}: the connection to the service was lost before its reply "
                             f"({type(exc).__name__}) -- the effect may or may not have happened (a lost "
                             "acknowledgement)") from None
    if reply.status_code != 200:
        try:
            error = reply.json()["error"]
            detail, error_type = f"{error['type']}: {error['message']}", str(error["type"])
        except (ValueError, KeyError, TypeError):
            detail, error_type = one_line(reply.text), None
        raise ToolCallFailed(f"{name}: the service answered {reply.status_code} ({detail})", reply.status_code,
                             error_type)
    try:
        result = reply.json()
        if not isinstance(result, dict):
            raise ValueError(type(result).__name__)
    except ValueError:
        raise ToolCallFailed(f"{name}: the service answered 200 but not with a JSON object "
                             f"({one_line(reply.text, 80)!r})") from None
    if reply.headers.get("Idempotent-Replayed") == "true":
        result["replayed"] = True
    return result


def charge_card(order_id: str, amount: float, *, idempotency_key: str | None = None) -> dict:
    return call_tool("charge_card", {"order_id": order_id, "amount": amount}, idempotency_key=idempotency_key)


def reserve_item(order_id: str, sku: str, *, idempotency_key: str | None = None) -> dict:
    return call_tool("reserve_item", {"order_id": order_id, "sku": sku}, idempotency_key=idempotency_key)


def send_confirmation(order_id: str, *, idempotency_key: str | None = None) -> dict:
    return call_tool("send_confirmation", {"order_id": order_id}, idempotency_key=idempotency_key)


# The compensations: each undoes one step, and takes an idempotency key of its own.
def refund_charge(order_id: str, amount: float, *, idempotency_key: str | None = None) -> dict:
    return call_tool("refund_charge", {"order_id": order_id, "amount": amount}, idempotency_key=idempotency_key)


def release_item(order_id: str, sku: str, *, idempotency_key: str | None = None) -> dict:
    return call_tool("release_item", {"order_id": order_id, "sku": sku}, idempotency_key=idempotency_key)


def send_cancellation(order_id: str, *, idempotency_key: str | None = None) -> dict:
    return call_tool("send_cancellation", {"order_id": order_id}, idempotency_key=idempotency_key)


def list_charges(order_id: str) -> list[dict]:
    """The charges the payment service holds for ``order_id``, oldest first (each with its ``id`` and
    ``amount``): how to find out whether an order was charged without relying on an idempotency key, which
    the provider forgets after its lifetime. A read: no effect, no key."""
    return _list_effects("/payments/charges", "charges", order_id)


def list_reservations(order_id: str) -> list[dict]:
    """The reservations the inventory service holds for ``order_id``, oldest first (each with its ``id`` and
    ``sku``): how a saga that never heard whether a reservation happened finds out whether there is one to
    release. A read: no effect, no key."""
    return _list_effects("/inventory/reservations", "reservations", order_id)


def _list_effects(path: str, what: str, order_id: str) -> list[dict]:
    base = os.environ.get(ENV_SERVICES_URL)
    if not base:
        raise WorldNotRunning(f"{ENV_SERVICES_URL} is not set, so there are no services to call; {HOW_TO_START}")
    try:
        reply = httpx.get(base + path, params={"order_id": order_id}, timeout=TOOL_TIMEOUT,
                          headers={"X-Crashlab-Pid": str(os.getpid())}, verify=TLS)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        raise WorldNotRunning(f"cannot reach the services at {base}; {HOW_TO_START}") from None
    except httpx.HTTPError as exc:
        raise ToolCallFailed(f"list {what}: no reply from the service ({type(exc).__name__})") from None
    if reply.status_code != 200:
        raise ToolCallFailed(f"list {what}: the service answered {reply.status_code} ({one_line(reply.text)})",
                             reply.status_code)
    return reply.json()["data"]


__all__ = ["SERVICE_PATHS", "TOOL_TIMEOUT", "call_tool", "charge_card", "list_charges", "list_reservations",
           "refund_charge",
           "release_item", "reserve_item", "send_cancellation", "send_confirmation", "validate_tool_call"]
