"""Replaying a saved workflow history against some workflow code, as a deploy pipeline would.

``await replay_verdict(OrderWorkflow, history)`` in a notebook, or -- to replay a learner's workflow
without importing it into the process that judges it --
``python -m crashlab.engines.temporal.replay MODULE CLASS HISTORY.json WORKFLOW_ID``, which prints the verdict
on its last line.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import re
import sys
import warnings
from pathlib import Path

from crashlab.plumbing.tracebacks import cut_at_word


def rejection_reason(error: str, width: int = 200) -> str:
    """Why the Replayer refused the code, in words a notebook line can hold whole. The sandbox's refusal says what
    it refused in its first sentence (``Cannot access datetime.datetime.now.__call__ from inside a workflow.``);
    the rest is advice about pass-through imports, and a cut inside it read as a different message."""
    message = re.search(r'message: "(.*?)"', error)
    reason = message.group(1) if message else error
    first = re.match(r"(.+?[.!?])(?:\s|$)", reason)
    return cut_at_word(first.group(1) if first else reason, width)


async def replay_verdict(workflow_cls, history) -> str:
    """``"replays cleanly"``, or ``"REJECTED: ..."`` with the reason (a nondeterminism error, say)."""
    from temporalio.worker import Replayer

    quiet = logging.getLogger("temporalio")
    level, quiet.level = quiet.level, logging.CRITICAL  # the verdict says it; no traceback on stderr
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the sandbox's warnings about late imports
            await Replayer(workflows=[workflow_cls]).replay_workflow(history)
    except Exception as exc:  # NondeterminismError, or the sandbox refusing a call
        return f"REJECTED: {rejection_reason(str(exc))}"
    finally:
        quiet.setLevel(level)
    return "replays cleanly"


def main(argv: list[str]) -> None:
    from temporalio.client import WorkflowHistory

    module, cls, history_file, workflow_id = argv
    sys.path.insert(0, str(Path.cwd()))
    workflow_cls = getattr(importlib.import_module(module), cls)
    history = WorkflowHistory.from_json(workflow_id, Path(history_file).read_text())
    print(asyncio.run(replay_verdict(workflow_cls, history)))


if __name__ == "__main__":
    main(sys.argv[1:])
