"""Every error the course raises on purpose, under one root, :class:`CrashlabError`: its message says what went
wrong and what to do, so a command catches the root and prints one line (``error: ...``), never a traceback.
The root and the agents' family are here; each other error lives beside the code that raises it:

    CrashlabError
    +-- AgentError                  an agent cannot fix it by retrying: an agent file catches this one family,
    |   |                           prints one line and exits 2 (crashlab.agent.agent_main)
    |   +-- WorldNotRunning         no world's address in the environment, or none answering there
    |   +-- DiskFull                a record could not be written: the disk is full
    |   +-- MalformedToolCall       the model asked for a tool that does not exist, or with bad arguments
    |   +-- CallFailed              a request to the world failed (status, error type, retryable, permanent)
    |   |   +-- ToolCallFailed      ... to a service
    |   |   +-- ModelCallFailed     ... to the model
    |   +-- TemporalUnavailable     crashlab.engines.temporal.client: no Temporal server to reach
    |   +-- RestateUnavailable      crashlab.engines.restate.client: no Restate server to reach
    |   +-- OrderLocked             crashlab.eventlog: another process holds the order's lock
    |   +-- LessonOneNotReady       crashlab.release.templates.own_lesson01 (a release's answers.lesson01): the
    |                               learner's lesson 1 files, which lessons 2 and 7 run, are missing or unanswered
    +-- ServerError                 a server the course starts could not be found, started, reached or stopped
    |   +-- TemporalServerError     crashlab.engines.temporal (each engine's own: its registry entry names it)
    |   +-- RestateServerError      crashlab.engines.restate
    |   +-- PostgresError           crashlab.engines.postgres: the throwaway PostgreSQL
    +-- CorruptLogError             crashlab.eventlog: a complete line of lesson 1's log cannot be read
    +-- WorldError                  crashlab.world.errors: the world could not be started, reached or stopped
    +-- LedgerError                 crashlab.world.ledger: a ledger file is missing, unreadable or corrupt
    +-- InvalidRequest              crashlab.world.policy: not a valid Messages API conversation (a 400)
    +-- LauncherError               crashlab.harness.launcher: the warm launcher could not start or fork
    +-- RowsStopped                 crashlab.harness.runs: the crash test is being stopped (Ctrl-C)
    +-- BenchError                  crashlab.engines.workload: a benchmark row could not be measured (its note)
    +-- GradingError                crashlab.grading.report: the file cannot be graded
    +-- SubjectGone                 crashlab.grading.proxies: the process running the student's code is gone
    +-- ReleaseError                crashlab.release.student: the release cannot be made where asked
    +-- UsageError                  crashlab.cli.args: options that do not go together
    +-- OutputError                 crashlab.plumbing.outputs: the output would replace a file the command did not write
    +-- SandboxError                crashlab.plumbing.sandbox_users: privileges could not be dropped
    +-- ViewError                   crashlab.plumbing.sandbox_view: a sandboxed process's view could not be built
    +-- PortTaken                   crashlab.plumbing.ports: another process took the port first
    +-- FinishExerciseFirst         crashlab.lessons.notebook: a demonstration waits for an exercise (one line)

Each also keeps the built-in base it had before the root existed (``RuntimeError``; ``ValueError`` for
``InvalidRequest``, ``UsageError`` and ``OutputError``), so code that catches those still catches them. Not in the
tree, on purpose: ``crashlab.grading.proxies.StudentCodeError``, the stand-ins for what a student's code raised.
"""

from __future__ import annotations

from crashlab.order import PERMANENT_ERRORS

# What every "the world is not there" message ends with.
HOW_TO_START = ("start one with `crashlab world start`, or in Python with "
                "`world = crashlab.World.start()` and run the agent with `env=world.env()`")


class CrashlabError(Exception):
    """The root of every error the course raises on purpose (the tree is in this module's docstring)."""


class AgentError(CrashlabError, RuntimeError):
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


class ServerError(CrashlabError, RuntimeError):
    """A server the course starts (an engine's, PostgreSQL) could not be found, started, reached or stopped. Each
    engine's server raises its own subclass (its registry entry names it); the message says what to do."""


__all__ = ["DISK_FULL", "HOW_TO_START", "AgentError", "CallFailed", "CrashlabError", "DiskFull", "MalformedToolCall",
           "ModelCallFailed", "ServerError", "ToolCallFailed", "WorldNotRunning"]
