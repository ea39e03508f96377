"""The model's streamed reply: a request with ``"stream": true`` is answered with the Messages API's server-sent events,
and a crash point can fall inside it.

The reply is decided and logged first, exactly as a non-streamed one (:mod:`crashlab.world.server`): the stream is
the delivery of an answer the model ledger already holds, so the audit's model counts do not change, and the reply's
message id (in ``message_start``) is the attempt a relay names. The events are those the real API sends, in HTTP/1.1
chunked coding, one event a chunk, flushed: ``message_start`` (no content yet), ``ping``, per content block
``content_block_start`` / ``content_block_delta`` (``text_delta`` a word at a time, each with the space before it;
a tool_use block's input as ``input_json_delta`` pieces of 12 characters after an empty one) /
``content_block_stop``, then ``message_delta`` (the stop reason) and ``message_stop``. Only text deltas are paced
(:class:`StreamSettings`, seconds per text delta): a user watches words, not tool arguments.

Inside a stream the world meets two instants of a crash point (:mod:`crashlab.crash_points`): ``mid`` after each
text delta is flushed (``mid:model#N@chunkK``), and ``after`` just before ``message_stop`` -- held back, so the agent
cannot have the whole message (the SDK's ``get_final_message`` waits for the stream's end) while the user has seen
every word. Before such a kill the world waits until the screen shows the text sent so far (matched word by word
since the stream began, so a relay may batch or re-chunk), or until the client has read every byte sent and shown
nothing new for :data:`SCREEN_QUIET` seconds (an agent that shows nothing live), at most :data:`SCREEN_CAP`. Killing
at once would make how much the user saw a race with the agent's reading; the wait makes it exact at any pace, and
costs an agent that shows everything it reads nothing.

A fault, ``cut_stream`` (``World.inject``), drops the connection after a given number of text deltas, leaving the
agent alive: the client sees an incomplete chunked body, as when a world or a proxy dies mid-answer.

Opt-in only: a request without ``"stream": true`` is answered as it always was, byte for byte. With
``vary_wording`` (off by default) a streamed reply is worded differently each time the same conversation is asked
again, as a real model's is, so that a screen can show an answer the conversation never recorded.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crashlab.crash_points import MID, When
from crashlab.world import ledger
from crashlab.world.crashes import CrashSite, unread_bytes
from crashlab.world.screen_ledger import ScreenLedger

STREAM_PACE = 0.05   # seconds per text delta by default: the order's final answer takes about a second
MATRIX_PACE = 0.005  # in a crash matrix's rows, which nobody watches (the screen wait keeps the points exact)
SCREEN_QUIET = 1.0   # seconds without a new show (the client having read all it was sent) before a kill goes ahead
SCREEN_CAP = 10.0    # the longest a kill waits for the screen
JSON_PIECE = 12      # characters of tool-input JSON per input_json_delta
# A real model words the same answer differently each time; with vary_wording the nth repeat takes the nth form.
WORDINGS = {"end_turn": ("{text}", "Done. {text}", "All set: {text}"),
            "tool_use": ("{text}", "Now: {text}", "Next I will call a tool. {text}")}


@dataclass
class StreamSettings:
    """How the world streams: ``pace`` seconds per text delta (0: as fast as the client reads), and whether a repeated
    streamed call is worded differently (``vary_wording``). Set through the admin API (``World.streaming``)."""

    pace: float = STREAM_PACE
    vary_wording: bool = False

    def update(self, body: Any) -> str | None:
        """Apply ``{"pace"?, "vary_wording"?}``; what is wrong with it, in one line, or None."""
        if not isinstance(body, dict) or set(body) - {"pace", "vary_wording"}:
            return f"stream settings are {{'pace': seconds, 'vary_wording': true or false}}, got {body!r}"
        pace, vary = body.get("pace", self.pace), body.get("vary_wording", self.vary_wording)
        if isinstance(pace, bool) or not isinstance(pace, (int, float)) or not 0 <= pace <= 5:
            return f"pace must be seconds per text delta between 0 and 5, got {pace!r}"
        if not isinstance(vary, bool):
            return f"vary_wording must be true or false, got {vary!r}"
        self.pace, self.vary_wording = float(pace), vary
        return None

    def as_json(self) -> dict:
        return asdict(self)


def sse(event: str, data: dict) -> bytes:
    """One server-sent event as the API frames it: an ``event:`` line, one ``data:`` line of JSON, a blank line."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def words(text: str) -> list[str]:
    """A text as word-sized deltas, each word with the space before it (as tokens come)."""
    parts = text.split(" ")
    return [parts[0]] + [" " + part for part in parts[1:]]


def stream_events(body: dict) -> list[tuple[str, dict]]:
    """The whole reply ``body`` (a non-streamed Messages API response) as the events that build it, in order."""
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**body["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": start}),
                                      ("ping", {"type": "ping"})]
    for index, block in enumerate(body["content"]):
        first: dict[str, Any]
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in words(block["text"])]
        else:  # tool_use: the block starts with an empty input, then its JSON arrives in pieces
            first = {**block, "input": {}}
            raw = json.dumps(block["input"])
            pieces = [""] + [raw[i:i + JSON_PIECE] for i in range(0, len(raw), JSON_PIECE)]
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": first}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                   for delta in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": body["usage"]["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def text_deltas(events: list[tuple[str, dict]]) -> list[str]:
    """The text deltas of a stream's events, in order (what a user watching it sees arrive)."""
    return [data["delta"]["text"] for name, data in events
            if name == "content_block_delta" and data["delta"]["type"] == "text_delta"]


def reworded(body: dict, repeat: int) -> dict:
    """``body`` with its text worded as the ``repeat``-th repeat of the same request would be (0: unchanged)."""
    forms = WORDINGS.get(str(body.get("stop_reason")), WORDINGS["tool_use"])
    form = forms[repeat % len(forms)]
    content = [{**block, "text": form.format(text=block["text"])} if block["type"] == "text" else block
               for block in body["content"]]
    return {**body, "content": content}


class StreamRoutes:
    """The streamed reply of :class:`crashlab.world.server.WorldHandler` (a mixin: the handler brings what the block
    below names)."""

    if TYPE_CHECKING:  # what crashlab.world.server.WorldHandler brings
        server: Any
        wfile: Any
        client_address: Any
        close_connection: bool

        @property
        def state_dir(self) -> Path: ...

        def send_response(self, code: int, message: str | None = None) -> None: ...

        def send_header(self, keyword: str, value: str) -> None: ...

        def end_headers(self) -> None: ...

        def _send(self, status: int, body: dict, headers: dict | None = None) -> None: ...

        def _error(self, status: int, kind: str, message: str) -> None: ...

    def _set_streaming(self, body: Any) -> None:
        """``{"pace"?, "vary_wording"?}``: how the world streams from now on (:class:`StreamSettings`)."""
        problem = self.server.streaming.update(body)
        if problem:
            self._error(400, "invalid_request_error", f"streaming: {problem}")
        else:
            self._send(200, self.server.streaming.as_json())

    @staticmethod
    def streams(request: Any) -> bool:
        """Whether ``request`` asks for a streamed reply."""
        return isinstance(request, dict) and request.get("stream") is True

    def _worded(self, request: Any, body: dict, messages_hash: str) -> dict:
        """A streamed reply worded as this repeat of its conversation would be, with ``vary_wording`` on."""
        if not (self.streams(request) and self.server.streaming.vary_wording and body.get("type") == "message"):
            return body
        conn = ledger.connect(self.state_dir / ledger.MODEL_LEDGER)
        try:
            repeat = conn.execute("SELECT count(*) FROM calls WHERE messages_hash = ? AND status = 200",
                                  (messages_hash,)).fetchone()[0]
        finally:
            conn.close()
        return reworded(body, int(repeat))

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream_reply(self, body: dict, site: CrashSite) -> None:
        """Send ``body`` (logged already) as a stream of events, meeting the crash point's instants inside it."""
        events = stream_events(body)
        chunks = text_deltas(events)
        screen = ScreenLedger(self.state_dir)
        began = screen.last_seq()
        screen.deliver(body["id"], site.order_id, chunks, sum(name == "content_block_delta" for name, _ in events))
        cut = self.server.faults.take("cut_stream", site.order_id)  # the connection drops after this many text deltas
        cut_after = None if cut is None else int(cut or 1)
        self.send_response(200)
        for name, value in (("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache"),
                            ("Transfer-Encoding", "chunked"), ("request-id", "req_" + secrets.token_hex(12))):
            self.send_header(name, value)
        self.end_headers()
        sent = shown = 0
        try:
            for name, data in events:
                if name == "message_stop" and self._kill_in_stream(site, "after", chunks, began):
                    screen.progress(body["id"], sent, cut="killed before message_stop")
                    return
                self._write_chunk(sse(name, data))
                if name != "content_block_delta":
                    continue
                sent += 1
                if data["delta"]["type"] == "text_delta":
                    shown += 1
                    if shown == cut_after:  # the agent is left alive, its stream cut mid-answer
                        screen.progress(body["id"], sent, cut="cut_stream fault")
                        self.close_connection = True
                        return
                    if self._kill_in_stream(site, MID, chunks[:shown], began, chunk=shown):
                        screen.progress(body["id"], sent, cut=f"killed after text delta {shown}")
                        return
                    time.sleep(self.server.streaming.pace)
            self._write_chunk(b"")  # the last chunk of the chunked coding: the body is whole
            screen.progress(body["id"], sent, complete=True)
        except (BrokenPipeError, ConnectionResetError):
            screen.progress(body["id"], sent, cut="client gone")
            self.close_connection = True

    def _kill_in_stream(self, site: CrashSite, when: When, sent: list[str], began: int, **detail: Any) -> bool:
        """If the armed point is met here, wait for the screen (see the module's docstring), then kill the run; True
        when it was killed (send nothing more)."""
        if not site.due(when, **detail):
            return False
        self._wait_for_screen(site.order_id, sent, began)
        if site.fire(when, **detail):
            self.close_connection = True
            return True
        return False

    def _wait_for_screen(self, order_id: str | None, sent: list[str], began: int) -> float:
        """Block until the screen's rows for ``order_id`` after row ``began`` end with the words of ``sent``, or the
        client has read all it was sent and no row came for :data:`SCREEN_QUIET` seconds; at most
        :data:`SCREEN_CAP`. Returns the seconds waited."""
        want = "".join(sent).split()
        screen = ScreenLedger(self.state_dir)
        ports = (self.client_address[1], self.server.server_address[1])
        start = time.monotonic()
        count, changed = -1, start
        while (now := time.monotonic()) - start < SCREEN_CAP:
            rows = [row for row in screen.rows(order_id or "", began) if row["kind"] == "show"]
            seen = " ".join(row["text"] for row in rows).split()
            if want and seen[-len(want):] == want:
                break
            if len(rows) != count:
                count, changed = len(rows), now
            elif now - changed > SCREEN_QUIET and not unread_bytes(*ports):
                break
            time.sleep(0.01)
        return time.monotonic() - start


__all__ = ["JSON_PIECE", "MATRIX_PACE", "SCREEN_CAP", "SCREEN_QUIET", "STREAM_PACE", "WORDINGS", "StreamRoutes", "StreamSettings",
           "reworded", "sse", "stream_events", "text_deltas", "words"]
