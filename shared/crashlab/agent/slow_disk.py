"""A slow disk under LangGraph's SQLite checkpointer, for a lesson's world or a check's: in an agent run whose
environment sets ``CRASHLAB_SLOW_CHECKPOINTS_S``, every task result the checkpointer saves waits that many seconds
before its write, as writes do on a loaded machine.

LangGraph saves a task's result from a background thread and the run goes on without waiting for it
(``langgraph/pregel/_loop.py``, ``put_writes`` → ``self.submit``), so a slow disk is a wide window between a task's
end and its record. A key that holds only once that record is in (the model's ``tool_use`` id) fails in the window;
a key from the thread, the turn and the tool does not. The warm launcher imports this module before it forks an
agent (a lesson names it in its preload list), so the patch is on the class the agent's file imports, whatever the
file says; without the variable, nothing changes.
"""

from __future__ import annotations

import os
import time

from langgraph.checkpoint.sqlite import SqliteSaver

from crashlab.engines.langgraph import ENV_SLOW_CHECKPOINTS
_saved_put_writes = SqliteSaver.put_writes


def slow_put_writes(self, *args, **kwargs):
    """``SqliteSaver.put_writes``, after the wait the run's environment names (none if it names none)."""
    delay = float(os.environ.get(ENV_SLOW_CHECKPOINTS) or 0)
    if delay > 0:
        time.sleep(delay)
    return _saved_put_writes(self, *args, **kwargs)


if getattr(SqliteSaver.put_writes, "__name__", "") != "slow_put_writes":  # imported twice: patch once
    SqliteSaver.put_writes = slow_put_writes  # type: ignore[method-assign]
