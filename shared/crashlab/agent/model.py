"""The model client an agent uses: the real ``anthropic`` SDK pointed at the world's model server (or, opt-in,
the real API), with one-line errors, and the helpers that turn its replies into the messages sent back."""

from __future__ import annotations

import importlib
import json
import os
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator

from crashlab.agent.connection import HOW_TO_START, TLS, one_line
from crashlab.envnames import ENV_MODEL_URL
from crashlab.errors import ModelCallFailed, WorldNotRunning
from crashlab.order import AMOUNT, ORDER_ID, TOOLS, order_task

# The model name sent with each request. The local server accepts any name; with a real key
# (opt-in, see real_api_enabled) this is the model that answers.
MODEL = os.environ.get("CRASHLAB_MODEL", "claude-haiku-4-5")
MAX_TOKENS = 400
# Seconds to wait for a reply. A request that gets none may still have landed: see ToolCallFailed.
MODEL_TIMEOUT = 30.0


def real_api_enabled() -> bool:
    """A real Anthropic key is opt-in: set CRASHLAB_REAL_MODEL=1 *and* ANTHROPIC_API_KEY."""
    return os.environ.get("CRASHLAB_REAL_MODEL") == "1" and bool(os.environ.get("ANTHROPIC_API_KEY"))


ONE_TOOL_PER_TURN = {"type": "auto", "disable_parallel_tool_use": True}


class Messages:
    def __init__(self, sdk_client, where: str):
        self._sdk = sdk_client
        self._where = where

    def create(self, **kwargs):
        """``anthropic.Anthropic().messages.create``, with a one-line error when the model is unreachable.

        The course's agents run one tool per turn, each with its own key and journal entry. A real model may
        ask for several tools in one reply, which such a loop would half answer (the API then refuses the
        next request); so unless the caller chooses otherwise, the model is told to ask for one at a time.
        With ``stream=True``, the SDK's raw events (:class:`~crashlab.agent.streaming.ModelEvents`), each read with
        the same one-line errors."""
        with self._one_line_errors():
            reply = self._sdk.messages.create(**_one_tool_per_turn(kwargs))
        if kwargs.get("stream") is True:
            from crashlab.agent.streaming import ModelEvents

            return ModelEvents(reply, self._one_line_errors)
        return reply

    def stream(self, **kwargs):
        """``anthropic.Anthropic().messages.stream``: ``with client.messages.stream(...) as stream:``, the SDK's
        stream (:class:`~crashlab.agent.streaming.ModelStream`), whose request *and* iteration raise
        :class:`ModelCallFailed` in one line -- a stream cut or stalled mid-answer included, which the SDK itself
        lets through as the HTTP library's exception (see :mod:`crashlab.agent.streaming`)."""
        from crashlab.agent.streaming import ModelStreamManager

        return ModelStreamManager(self._sdk.messages.stream(**_one_tool_per_turn(kwargs)), self._one_line_errors)

    @contextmanager
    def _one_line_errors(self) -> Iterator[None]:
        """The SDK's errors, and the HTTP library's from inside a started stream, as the course's one-line ones."""
        import anthropic

        http = sdk_http_library()
        try:
            yield
        except anthropic.APITimeoutError:
            raise ModelCallFailed(f"the model at {self._where} did not answer within its timeout -- the request may "
                                  "or may not have been received") from None
        except anthropic.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__
            if cause == "ConnectError":  # nothing was sent: no model is listening there
                raise WorldNotRunning(f"cannot reach the model at {self._where} ({exc}); {HOW_TO_START}") from None
            raise ModelCallFailed(f"the connection to the model at {self._where} was lost before its reply ({cause}) "
                                  "-- the request may or may not have been received") from None
        except anthropic.APIStatusError as exc:
            raise ModelCallFailed(f"the model at {self._where} answered {exc.status_code} "
                                  f"({one_line(exc.message)})", exc.status_code) from None
        except anthropic.APIError as exc:  # a reply that is not a model's answer
            raise ModelCallFailed(f"the model at {self._where} sent a reply that is not an answer "
                                  f"({one_line(exc.message)})") from None
        except http.TimeoutException as exc:  # inside a started stream: the SDK does not wrap these
            raise ModelCallFailed(f"the model's stream from {self._where} stalled mid-answer ({type(exc).__name__}: "
                                  f"nothing for {MODEL_TIMEOUT:g} s) -- the answer was not received whole") from None
        except http.TransportError as exc:
            raise ModelCallFailed(f"the model's stream from {self._where} was cut mid-answer ({type(exc).__name__}) "
                                  "-- the answer was not received whole") from None


def _one_tool_per_turn(kwargs: dict) -> dict:
    if kwargs.get("tools") and "tool_choice" not in kwargs:
        return {**kwargs, "tool_choice": ONE_TOOL_PER_TURN}
    return kwargs


class ModelClient:
    """Looks like ``anthropic.Anthropic``: use ``client.messages.create(...)``."""

    def __init__(self, sdk_client, where: str):
        self.sdk = sdk_client
        self.messages = Messages(sdk_client, where)


def model_client() -> ModelClient:
    """The real ``anthropic`` SDK, talking to the world's model server (or, opt-in, the real API)."""
    import anthropic

    if real_api_enabled():
        return ModelClient(anthropic.Anthropic(max_retries=0), "the Anthropic API")
    url = world_model_url()
    sdk = anthropic.Anthropic(base_url=url, **_offline_settings(),
                              http_client=anthropic.DefaultHttpxClient(verify=TLS))  # the shared TLS context
    return ModelClient(sdk, url)


def async_sdk_client():
    """The SDK's own ``anthropic.AsyncAnthropic``, set up as :func:`model_client`'s (world, no hidden retries),
    for a framework that takes an SDK client and makes the calls itself (Pydantic AI's ``AnthropicProvider``)."""
    import anthropic

    if real_api_enabled():
        return anthropic.AsyncAnthropic(max_retries=0)
    return anthropic.AsyncAnthropic(base_url=world_model_url(), **_offline_settings(),
                                    http_client=anthropic.DefaultAsyncHttpxClient(verify=TLS))


def world_model_url() -> str:
    url = os.environ.get(ENV_MODEL_URL)
    if not url:
        raise WorldNotRunning(f"{ENV_MODEL_URL} is not set, so there is no model to talk to; {HOW_TO_START}")
    return url


def _offline_settings() -> dict:
    return {"api_key": "offline-course-model",  # the local server ignores it; no real key is ever needed
            "max_retries": 0,  # a hidden retry would be a hidden repeated call
            "timeout": MODEL_TIMEOUT, "default_headers": {"X-Crashlab-Pid": str(os.getpid())}}


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




def sdk_http_library() -> ModuleType:
    """The HTTP library the SDK is built on (the module its default client class comes from), whose exceptions
    a started stream lets through."""
    import anthropic

    base = next(c for c in anthropic.DefaultHttpxClient.__mro__ if not c.__module__.startswith("anthropic"))
    return importlib.import_module(base.__module__.split(".")[0])


def warm_up_sdk() -> None:
    """Send one request through the SDK to a canned reply made in this process: no server and no world sees it.

    The SDK leaves work to its first call -- importing its transport, building the pydantic schemas it reads a
    reply with -- about 60 ms of CPU in every agent process. The warm launcher (:mod:`crashlab.harness.launcher`) calls
    this before it forks, so each agent process starts with that done, as it starts with the SDK imported. The
    call leaves nothing an agent could see: no client, no log, no count."""
    import anthropic

    http = sdk_http_library()
    reply = {"id": "msg_warm_up", "type": "message", "role": "assistant", "model": MODEL,
             "content": [{"type": "text", "text": "warm-up"},
                         {"type": "tool_use", "id": "toolu_warm_up", "name": "charge_card",
                          "input": {"order_id": ORDER_ID, "amount": AMOUNT}}],
             "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    anthropic.DefaultHttpxClient(verify=TLS).close()  # imports the real transport, as model_client() will
    transport = http.MockTransport(lambda request: http.Response(200, json=reply))
    with anthropic.DefaultHttpxClient(transport=transport, verify=TLS) as client:
        sdk = anthropic.Anthropic(base_url="http://warm-up.invalid", api_key="warm-up", max_retries=0,
                                  timeout=MODEL_TIMEOUT, http_client=client)
        sdk.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,  # type: ignore[call-overload]
                            tool_choice=ONE_TOOL_PER_TURN, messages=[{"role": "user", "content": order_task()}])


__all__ = ["MAX_TOKENS", "MODEL", "MODEL_TIMEOUT", "ONE_TOOL_PER_TURN", "Messages", "ModelClient", "async_sdk_client",
           "content_to_dicts", "world_model_url",
           "first_tool_use", "model_client", "real_api_enabled", "sdk_http_library", "tool_error_message", "tool_result_message",
           "warm_up_sdk"]
