"""What an agent file imports: the order task, the model client, the tool client.

Agents reach the model and the tools through these clients. Crash points are not in here: the world
decides and observes them (see :mod:`crashlab.world.crashes`), so nothing in an agent process can tell
whether it is about to be killed, or pretend that it was. The model client is the real ``anthropic`` SDK pointed at the course's local model
server; the tools are HTTP calls to the world's services.

A minimal agent file::

    from crashlab.agent import MODEL, TOOLS, model_client, call_tool, order_task, agent_main

    def run(order_id):
        client = model_client()
        messages = [{"role": "user", "content": order_task(order_id)}]
        ...

    if __name__ == "__main__":
        agent_main(run)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import httpx

from crashlab.eventlog import CorruptLogError
from crashlab.order import (ALL_TOOL_SCHEMAS, AMOUNT, COMPENSATION_TOOLS, ORDER_ID, PERMANENT_ERRORS, SKU, TOOLS,
                            TOOLS_WITH_UNDO, check_order_id, order_task, undo_request, undo_task)
from crashlab.world import ENV_MODEL_URL, ENV_SERVICES_URL, ENV_STATE_DIR

# The model name sent with each request. The local server accepts any name; with a real key
# (opt-in, see real_api_enabled) this is the model that answers.
MODEL = os.environ.get("CRASHLAB_MODEL", "claude-haiku-4-5")
MAX_TOKENS = 400
# Seconds to wait for a reply. A request that gets none may still have landed: see ToolCallFailed.
MODEL_TIMEOUT = 30.0
TOOL_TIMEOUT = 30.0
# Every httpx client builds a TLS context, loading the whole certificate store (about 20 ms of CPU), even for
# the world's plain-http URL; and httpx.post() makes a new client per call. The clients here share one context,
# built once per process (the warm launcher builds it as it imports this module, before it forks the agents).
_TLS = httpx.create_ssl_context()

SERVICE_PATHS = {
    "charge_card": "/payments/charges",
    "reserve_item": "/inventory/reservations",
    "send_confirmation": "/email/messages",
    "refund_charge": "/payments/refunds",
    "release_item": "/inventory/releases",
    "send_cancellation": "/email/cancellations",
}

_HOW_TO_START = ("start one with `crashlab world start`, or in Python with "
                 "`world = crashlab.World.start()` and run the agent with `env=world.env()`")


class AgentError(RuntimeError):
    """An error an agent cannot fix by retrying: the message says what went wrong and what to do."""


class WorldNotRunning(AgentError):
    pass


class MalformedToolCall(AgentError):
    """The model asked for a tool that does not exist, or with missing or mistyped arguments.
    Raised before anything reaches a service, so a bad reply never causes an effect."""


class CallFailed(AgentError):
    """A request to the world answered with an error, or never answered (``status`` is then None, and
    the request may or may not have been received). ``retryable``: sending it again may work -- no reply,
    a 5xx, or the one 4xx of its kind that says "later" (``RETRY_LATER``). ``error_type``: the error's
    ``type`` in the reply, if any. ``permanent``: the step failed for good (a declined card, an item out of
    stock, a rejected address: ``crashlab.order.PERMANENT_ERRORS``) -- never retryable; undo the order."""

    RETRY_LATER: int = 0

    def __init__(self, message: str, status: int | None = None, error_type: str | None = None):
        super().__init__(message)
        self.status = status
        self.error_type = error_type

    @property
    def permanent(self) -> bool:
        return self.error_type in PERMANENT_ERRORS

    @property
    def retryable(self) -> bool:
        if self.permanent:
            return False
        return self.status is None or self.status == self.RETRY_LATER or self.status >= 500


class ToolCallFailed(CallFailed):
    """A service answered with an error, or never answered at all (``status`` is then None).

    ``retryable`` is true when sending the same request again with the same idempotency key is the
    right move: no reply at all (a lost acknowledgement), 409 (the first attempt is still in
    flight) or a 5xx. A 400 -- such as a key reused with other parameters -- is never retryable.
    """

    RETRY_LATER = 409


class ModelCallFailed(CallFailed):
    """The model answered with an error, or never answered. ``retryable``: no reply, 429 (slow down) or a 5xx."""

    RETRY_LATER = 429


# --- the model -------------------------------------------------------------------------------------
def real_api_enabled() -> bool:
    """A real Anthropic key is opt-in: set CRASHLAB_REAL_MODEL=1 *and* ANTHROPIC_API_KEY."""
    return os.environ.get("CRASHLAB_REAL_MODEL") == "1" and bool(os.environ.get("ANTHROPIC_API_KEY"))


ONE_TOOL_PER_TURN = {"type": "auto", "disable_parallel_tool_use": True}


class _Messages:
    def __init__(self, sdk_client, where: str):
        self._sdk = sdk_client
        self._where = where

    def create(self, **kwargs):
        """``anthropic.Anthropic().messages.create``, with a one-line error when the model is unreachable.

        The course's agents run one tool per turn, each with its own key and journal entry. A real model may
        ask for several tools in one reply, which such a loop would half answer (the API then refuses the
        next request); so unless the caller chooses otherwise, the model is told to ask for one at a time."""
        import anthropic

        if kwargs.get("tools") and "tool_choice" not in kwargs:
            kwargs["tool_choice"] = ONE_TOOL_PER_TURN
        try:
            return self._sdk.messages.create(**kwargs)
        except anthropic.APITimeoutError:
            raise ModelCallFailed(f"the model at {self._where} did not answer within its timeout -- the request may "
                                  "or may not have been received") from None
        except anthropic.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__
            if cause == "ConnectError":  # nothing was sent: no model is listening there
                raise WorldNotRunning(f"cannot reach the model at {self._where} ({exc}); {_HOW_TO_START}") from None
            raise ModelCallFailed(f"the connection to the model at {self._where} was lost before its reply ({cause}) "
                                  "-- the request may or may not have been received") from None
        except anthropic.APIStatusError as exc:
            raise ModelCallFailed(f"the model at {self._where} answered {exc.status_code} "
                                  f"({_one_line(exc.message)})", exc.status_code) from None
        except anthropic.APIError as exc:  # a reply that is not a model's answer
            raise ModelCallFailed(f"the model at {self._where} sent a reply that is not an answer "
                                  f"({_one_line(exc.message)})") from None


class ModelClient:
    """Looks like ``anthropic.Anthropic``: use ``client.messages.create(...)``."""

    def __init__(self, sdk_client, where: str):
        self.sdk = sdk_client
        self.messages = _Messages(sdk_client, where)


def model_client() -> ModelClient:
    """The real ``anthropic`` SDK, talking to the world's model server (or, opt-in, the real API)."""
    import anthropic

    if real_api_enabled():
        return ModelClient(anthropic.Anthropic(max_retries=0), "the Anthropic API")
    url = os.environ.get(ENV_MODEL_URL)
    if not url:
        raise WorldNotRunning(f"{ENV_MODEL_URL} is not set, so there is no model to talk to; {_HOW_TO_START}")
    sdk = anthropic.Anthropic(
        base_url=url,
        api_key="offline-course-model",  # the local server ignores it; no real key is ever needed
        max_retries=0,  # a hidden retry would be a hidden repeated call
        timeout=MODEL_TIMEOUT,
        default_headers={"X-Crashlab-Pid": str(os.getpid())},
        http_client=anthropic.DefaultHttpxClient(verify=_TLS),  # the SDK's own client, with the shared context
    )
    return ModelClient(sdk, url)


def _one_line(text: str, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


def content_to_dicts(content) -> list[dict]:
    """SDK content blocks as the plain dicts the API accepts back (and that JSON can store)."""
    blocks = []
    for block in content:
        kind = block["type"] if isinstance(block, dict) else block.type
        get = (lambda k: block[k]) if isinstance(block, dict) else (lambda k: getattr(block, k))
        if kind == "text":
            blocks.append({"type": "text", "text": get("text")})
        elif kind == "tool_use":
            blocks.append({"type": "tool_use", "id": get("id"), "name": get("name"), "input": dict(get("input"))})
    return blocks


def first_tool_use(content) -> dict | None:
    """The first tool_use block of a reply's content, as a dict, or None."""
    for block in content_to_dicts(content):
        if block["type"] == "tool_use":
            return block
    return None


def tool_result_message(tool_use_id: str, result: dict) -> dict:
    """The user message that answers one tool_use."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id,
                                         "content": json.dumps(result)}]}


def tool_error_message(tool_use_id: str, error: Exception) -> dict:
    """The user message that tells the model its tool call failed (``is_error``), with the error's text: offered
    :data:`TOOLS_WITH_UNDO`, the model undoes an order whose step failed for good."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True,
                                         "content": str(error)}]}


# --- the tools ---------------------------------------------------------------------------------------
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
        raise WorldNotRunning(f"{ENV_SERVICES_URL} is not set, so there are no services to call; {_HOW_TO_START}")
    headers = {"X-Crashlab-Pid": str(os.getpid())}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    try:
        reply = httpx.post(base + SERVICE_PATHS[name], json=args, headers=headers, timeout=TOOL_TIMEOUT,
                           verify=_TLS)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL):
        raise WorldNotRunning(f"{ENV_SERVICES_URL}={base!r} is not a URL like http://127.0.0.1:8123; "
                              f"{_HOW_TO_START}") from None
    except (httpx.ConnectError, httpx.ConnectTimeout):  # nothing was sent
        raise WorldNotRunning(f"cannot reach the services at {base}; {_HOW_TO_START}") from None
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
            detail, error_type = _one_line(reply.text), None
        raise ToolCallFailed(f"{name}: the service answered {reply.status_code} ({detail})", reply.status_code,
                             error_type)
    try:
        result = reply.json()
        if not isinstance(result, dict):
            raise ValueError(type(result).__name__)
    except ValueError:
        raise ToolCallFailed(f"{name}: the service answered 200 but not with a JSON object "
                             f"({_one_line(reply.text, 80)!r})") from None
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


def warm_up_sdk() -> None:
    """Send one request through the SDK to a canned reply made in this process: no server and no world sees it.

    The SDK leaves work to its first call -- importing its transport, building the pydantic schemas it reads a
    reply with -- about 60 ms of CPU in every agent process. The warm launcher (:mod:`crashlab.launcher`) calls
    this before it forks, so each agent process starts with that done, as it starts with the SDK imported. The
    call leaves nothing an agent could see: no client, no log, no count."""
    import importlib

    import anthropic

    base = next(c for c in anthropic.DefaultHttpxClient.__mro__ if not c.__module__.startswith("anthropic"))
    http = importlib.import_module(base.__module__.split(".")[0])  # the HTTP library the SDK is built on
    reply = {"id": "msg_warm_up", "type": "message", "role": "assistant", "model": MODEL,
             "content": [{"type": "text", "text": "warm-up"},
                         {"type": "tool_use", "id": "toolu_warm_up", "name": "charge_card",
                          "input": {"order_id": ORDER_ID, "amount": AMOUNT}}],
             "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    anthropic.DefaultHttpxClient(verify=_TLS).close()  # imports the real transport, as model_client() will
    transport = http.MockTransport(lambda request: http.Response(200, json=reply))
    with anthropic.DefaultHttpxClient(transport=transport, verify=_TLS) as client:
        sdk = anthropic.Anthropic(base_url="http://warm-up.invalid", api_key="warm-up", max_retries=0,
                                  timeout=MODEL_TIMEOUT, http_client=client)
        sdk.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, tool_choice=ONE_TOOL_PER_TURN,
                            messages=[{"role": "user", "content": order_task()}])


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
        raise WorldNotRunning(f"{ENV_SERVICES_URL} is not set, so there are no services to call; {_HOW_TO_START}")
    try:
        reply = httpx.get(base + path, params={"order_id": order_id}, timeout=TOOL_TIMEOUT,
                          headers={"X-Crashlab-Pid": str(os.getpid())}, verify=_TLS)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        raise WorldNotRunning(f"cannot reach the services at {base}; {_HOW_TO_START}") from None
    except httpx.HTTPError as exc:
        raise ToolCallFailed(f"list {what}: no reply from the service ({type(exc).__name__})") from None
    if reply.status_code != 200:
        raise ToolCallFailed(f"list {what}: the service answered {reply.status_code} ({_one_line(reply.text)})",
                             reply.status_code)
    return reply.json()["data"]


# --- the process ---------------------------------------------------------------------------------------
def state_dir() -> Path:
    """Where this agent keeps its durable state (set by the harness or ``World.env()``)."""
    value = os.environ.get(ENV_STATE_DIR)
    if not value:
        raise WorldNotRunning(f"{ENV_STATE_DIR} is not set; {_HOW_TO_START}")
    path = Path(value)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _order_id(text: str) -> str:
    try:
        return check_order_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def agent_main(run: Callable[[str], Any], argv: list[str] | None = None) -> None:
    """The command line every agent file shares: ``python AGENT.py --order ORD-8842``.

    Errors the agent cannot recover from -- the course's own errors and a damaged event log -- are printed
    as one clear line (exit code 2), not a traceback.
    """
    parser = argparse.ArgumentParser(description="Run an order to completion, or resume it.")
    parser.add_argument("--order", default=ORDER_ID, type=_order_id, help="the order id (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        run(args.order)
    except (AgentError, CorruptLogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


__all__ = [
    "AMOUNT", "ORDER_ID", "SKU", "MODEL", "MAX_TOKENS", "TOOLS", "order_task", "model_client", "call_tool",
    "charge_card", "reserve_item", "send_confirmation", "content_to_dicts", "first_tool_use",
    "COMPENSATION_TOOLS", "TOOLS_WITH_UNDO", "undo_task", "undo_request", "refund_charge", "release_item",
    "send_cancellation", "list_charges", "list_reservations", "tool_error_message", "PERMANENT_ERRORS",
    "tool_result_message", "state_dir", "agent_main", "AgentError", "MalformedToolCall", "ToolCallFailed",
    "CallFailed", "ModelCallFailed", "WorldNotRunning", "validate_tool_call", "MODEL_TIMEOUT", "TOOL_TIMEOUT",
]
