"""One line per retry, not a traceback. An engine that retries a failed step logs each failed attempt as a warning
with the error's whole traceback (DBOS: "Step being automatically retried (attempt 3 of 1000)" and some twenty lines
under it; temporalio: "Completing activity as failed" and its traceback): an outage of a minute fills a terminal, and
hides the one line that says what is wrong. :func:`one_line_retries` keeps each such warning and puts the error on
its line instead -- its type and first words -- leaving errors (ERROR and above) and every other record as they are.
"""

from __future__ import annotations

import logging

from crashlab.agent.connection import HOW_TO_START, one_line

# The loggers whose retry warnings carry tracebacks: DBOS's, and temporalio's activity worker.
RETRY_LOGGERS = ("dbos", "temporalio.activity")


class OneLineRetries(logging.Filter):
    """A warning (below ERROR) logged with an exception gets the exception on its line, and no traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and record.levelno < logging.ERROR:
            error = record.exc_info[1]
            said = str(error).replace(f"; {HOW_TO_START}", "")  # how to start a world: not news during an outage
            message = record.getMessage()
            activity = getattr(record, "temporal_activity", None)  # temporalio puts the whole context in the text
            if isinstance(activity, dict) and f" ({activity})" in message:
                message = (message.replace(f" ({activity})", "") + f" (activity {activity.get('activity_type')} "
                           f"of {activity.get('workflow_id')}, attempt {activity.get('attempt')})")
            record.msg = f"{message}: {type(error).__name__}: {one_line(said, 200)}"
            record.args = None
            record.exc_info = record.exc_text = None
        return True


def one_line_retries(*loggers: str) -> None:
    """Make the retry warnings of ``loggers`` (default :data:`RETRY_LOGGERS`) one line each; safe to call again."""
    for name in loggers or RETRY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLineRetries) for f in logger.filters):
            logger.addFilter(OneLineRetries())


__all__ = ["OneLineRetries", "RETRY_LOGGERS", "one_line_retries"]
