"""The user's screen, as an agent (or its relay) reaches it: show text, withdraw a turn, ask where the user stands.

The screen is a world service (:mod:`crashlab.world.screen`) that records every request to show text, with whatever
identity the sender gives it, and never deduplicates: what a relay sends twice, the user sees twice. The identity
that survives a crash is (turn, chunk, attempt) -- the reply's place in the conversation, read from the durable
record and never from a counter in memory; the text delta's index in the reply; the reply's message id -- or, for
text read back from an engine's durable stream, (stream, offset). A relay that resumes asks :func:`screen_cursor`
what the user already has, and :func:`retract` a turn whose attempt changed (the user sees that answer restart).

    from crashlab.agent import retract, screen_cursor, show

    shown = screen_cursor(order_id)                 # {"turns": {"4": 5}, "attempts": {"4": "msg_..."}, ...}
    if shown["attempts"].get(str(turn)) not in (None, attempt):
        retract(order_id, turn)                     # another answer of this turn was on screen: withdraw it
    show(order_id, text, turn=turn, chunk=index, attempt=attempt)
"""

from __future__ import annotations

import os
import threading

import httpx

from crashlab.agent.connection import HOW_TO_START, TLS, one_line
from crashlab.envnames import ENV_SERVICES_URL
from crashlab.errors import CallFailed, WorldNotRunning

SCREEN_TIMEOUT = 10.0  # seconds: the screen is local and answers at once, unless the world is gone
_clients: dict[int, httpx.Client] = {}  # one kept-alive client per process: a relay shows a chunk at a time
_lock = threading.Lock()


def _client() -> httpx.Client:
    with _lock:
        client = _clients.get(os.getpid())
        if client is None:
            client = _clients[os.getpid()] = httpx.Client(timeout=SCREEN_TIMEOUT, verify=TLS)
        return client


def _ask(method: str, path: str, **kwargs) -> dict:
    base = os.environ.get(ENV_SERVICES_URL)
    if not base:
        raise WorldNotRunning(f"{ENV_SERVICES_URL} is not set, so there is no screen to show on; {HOW_TO_START}")
    try:
        reply = _client().request(method, base + path, headers={"X-Crashlab-Pid": str(os.getpid())}, **kwargs)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL):
        raise WorldNotRunning(f"cannot reach the screen at {base}; {HOW_TO_START}") from None
    except httpx.HTTPError as exc:
        raise CallFailed(f"the screen at {base} did not answer {path} ({type(exc).__name__}) -- it may or may not "
                         "have shown it") from None
    if reply.status_code != 200:
        try:
            message = reply.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = reply.text
        raise CallFailed(f"the screen refused {path}: {reply.status_code} ({one_line(message)})", reply.status_code)
    return reply.json()


def show(order_id: str, text: str, *, turn: int | None = None, chunk: int | None = None, attempt: str | None = None,
         stream: str | None = None, offset: int | None = None) -> int:
    """Show ``text`` on the user's screen for ``order_id``, with the identity given (each part optional: ``turn``
    from 1, ``chunk`` from 0, ``attempt`` a reply's message id; or ``stream`` and ``offset`` from 0). Returns the
    screen's sequence number for it."""
    identity = {"turn": turn, "chunk": chunk, "attempt": attempt, "stream": stream, "offset": offset}
    body = {"order_id": order_id, "text": text, **{k: v for k, v in identity.items() if v is not None}}
    return int(_ask("POST", "/screen/show", json=body)["seq"])


def retract(order_id: str, turn: int) -> int:
    """Withdraw what the screen shows for ``turn`` of ``order_id`` (the user sees that answer replaced)."""
    return int(_ask("POST", "/screen/retract", json={"order_id": order_id, "turn": turn})["seq"])


def screen_cursor(order_id: str, stream: str | None = None) -> dict:
    """Where the user stands: ``{"turns": {turn: last chunk shown}, "attempts": {turn: the attempt shown},
    "next_offset": one past the highest offset of ``stream`` shown}`` (turns are strings, as in JSON)."""
    params = {"order_id": order_id, **({"stream": stream} if stream is not None else {})}
    return _ask("GET", "/screen/cursor", params=params)


__all__ = ["SCREEN_TIMEOUT", "retract", "screen_cursor", "show"]
