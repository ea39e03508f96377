"""The errors an agent process raises for what retrying cannot fix: each message says what went wrong and what
to do. Every layer that an agent calls into (the model and tool clients, the engines' clients) raises these, so
an agent file catches one family, prints one line and exits 2 (:func:`crashlab.agent.agent_main`)."""

from __future__ import annotations

from crashlab.order import PERMANENT_ERRORS

# What every "the world is not there" message ends with.
HOW_TO_START = ("start one with `crashlab world start`, or in Python with "
                "`world = crashlab.World.start()` and run the agent with `env=world.env()`")


class AgentError(RuntimeError):
    """An error an agent cannot fix by retrying: the message says what went wrong and what to do."""


class WorldNotRunning(AgentError):
    pass


class DiskFull(AgentError):
    """A record could not be written because the disk is full: nothing of it was kept. Retrying cannot help until
    space is freed; the order resumes from what was kept."""


DISK_FULL = "disk_full"  # the error type of a world's answer when its ledgers could not be written (507)


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
        if self.permanent or self.error_type == DISK_FULL or self.status == 507:  # space must be freed first
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


__all__ = ["DISK_FULL", "HOW_TO_START", "AgentError", "CallFailed", "DiskFull", "MalformedToolCall", "ModelCallFailed", "ToolCallFailed", "WorldNotRunning"]
