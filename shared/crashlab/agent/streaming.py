"""A streamed model call through the course's client: the SDK's own stream, with the course's one-line errors
around the iteration as well as the request.

The SDK turns a failed request into its own errors (``anthropic.APIConnectionError`` and the rest), but once a
stream has started it lets the HTTP library's exceptions through as they are, from inside the ``for event in
stream`` loop: a world (or network) that dies mid-answer is ``RemoteProtocolError`` (an incomplete chunked body), one
that stalls is ``ReadTimeout``; and it never retries a started stream. An agent would die of a bare traceback. Here
each becomes :class:`~crashlab.errors.ModelCallFailed` in one line, with no status (the request was received; its
answer was not received whole), so ``retryable`` says to ask again. An ``event: error`` frame (the API's overload
mid-stream) is the same status error a non-streamed call gets. A stream cut this way never reaches
``get_final_message()``: nothing partial can be recorded by accident.

    from crashlab.agent import model_client

    with model_client().messages.stream(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages) as stream:
        for event in stream:                       # the SDK's events: message_start, text, content_block_delta, ...
            if event.type == "message_start":
                attempt = event.message.id         # the reply's id: which answer the coming text belongs to
            elif event.type == "text":
                show(order_id, event.text)         # each text delta as it arrives
        reply = stream.get_final_message()         # the whole message, as create() returns it
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable, Iterator

# The course client's translation of the SDK's and the HTTP library's errors into one-line ModelCallFailed errors:
# a context manager (see crashlab.agent.model.Messages), entered around every piece of SDK work below.
Guard = Callable[[], AbstractContextManager[None]]


class ModelStream:
    """The SDK's ``MessageStream`` (events, ``text_stream``, ``get_final_message()``, ``get_final_text()``,
    ``until_done()``, ``current_message_snapshot``), each guarded; any other attribute is the SDK stream's own."""

    def __init__(self, stream: Any, guard: Guard):
        self.sdk_stream = stream
        self._guard = guard

    def _guarded(self, items: Any) -> Iterator[Any]:
        with self._guard():
            yield from items

    def __iter__(self) -> Iterator[Any]:
        return self._guarded(self.sdk_stream)

    @property
    def text_stream(self) -> Iterator[str]:
        """The text deltas only, as they arrive."""
        return self._guarded(self.sdk_stream.text_stream)

    def get_final_message(self) -> Any:
        """The whole message once the stream has ended (it reads what is left of the stream first)."""
        with self._guard():
            return self.sdk_stream.get_final_message()

    def get_final_text(self) -> str:
        with self._guard():
            return self.sdk_stream.get_final_text()

    def until_done(self) -> None:
        with self._guard():
            self.sdk_stream.until_done()

    @property
    def current_message_snapshot(self) -> Any:
        return self.sdk_stream.current_message_snapshot

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sdk_stream, name)


class ModelStreamManager:
    """``with client.messages.stream(...) as stream:``: the request is sent on entering (its errors in one line),
    the response closed on leaving."""

    def __init__(self, manager: Any, guard: Guard):
        self._manager = manager
        self._guard = guard

    def __enter__(self) -> ModelStream:
        with self._guard():
            return ModelStream(self._manager.__enter__(), self._guard)

    def __exit__(self, *exc: Any) -> None:
        self._manager.__exit__(*exc)


class ModelEvents:
    """``client.messages.create(stream=True)``: the SDK's raw events, each read guarded; ``close()`` ends it early."""

    def __init__(self, events: Any, guard: Guard):
        self.sdk_stream = events
        self._guard = guard

    def __iter__(self) -> Iterator[Any]:
        with self._guard():
            yield from self.sdk_stream

    def __enter__(self) -> ModelEvents:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.sdk_stream.close()


__all__ = ["Guard", "ModelEvents", "ModelStream", "ModelStreamManager"]
