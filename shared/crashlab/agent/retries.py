"""One line per retry, not a traceback. An engine that retries a failed step logs each failed attempt with the
error's whole traceback: DBOS "Step being automatically retried (attempt 3 of 1000)" and some twenty lines under it;
temporalio "Completing activity as failed"; Restate "Exception in do_progress", with the step's traceback inside the
error's own message. An outage of a minute fills a terminal and hides the one line that says what is wrong.
:func:`one_line_retries` keeps each such record and puts the error on its line instead -- its type and the first line
of its message -- leaving every other record as it is.
"""

from __future__ import annotations

import logging
import re

from crashlab.agent.connection import HOW_TO_START, one_line

# The loggers whose retries carry tracebacks, and the highest level at which a record there is a retry's: Restate's
# SDK logs a failed ctx.run, which its server retries, as an error.
RETRY_LOGGERS = {"dbos": logging.WARNING, "temporalio.activity": logging.WARNING,
                 "restate.server_context": logging.ERROR}
_RELATED = re.compile(r"^Related command: (.+)$", re.MULTILINE)  # the step Restate names under its traceback


class OneLineRetries(logging.Filter):
    """A record up to ``level`` logged with an exception gets the exception on its line, and no traceback."""

    def __init__(self, level: int = logging.WARNING):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and record.levelno <= self.level:
            error = record.exc_info[1]
            text = str(error)
            said = (text.splitlines() or [""])[0].replace(f"; {HOW_TO_START}", "")  # not news during an outage
            step = _RELATED.search(text)
            message = record.getMessage()
            activity = getattr(record, "temporal_activity", None)  # temporalio puts the whole context in the text
            if isinstance(activity, dict) and f" ({activity})" in message:
                message = (message.replace(f" ({activity})", "") + f" (activity {activity.get('activity_type')} "
                           f"of {activity.get('workflow_id')}, attempt {activity.get('attempt')})")
            record.msg = (f"{message}{f' ({step[1]})' if step else ''}: {type(error).__name__}: "
                          f"{one_line(said, 200)}")
            record.args = None
            record.exc_info = record.exc_text = None
        return True


def one_line_retries(loggers: dict[str, int] | None = None) -> None:
    """Make the retries that ``loggers`` (default :data:`RETRY_LOGGERS`: name -> level) log one line each; safe to
    call again."""
    for name, level in (loggers or RETRY_LOGGERS).items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLineRetries) for f in logger.filters):
            logger.addFilter(OneLineRetries(level))


__all__ = ["OneLineRetries", "RETRY_LOGGERS", "one_line_retries"]
