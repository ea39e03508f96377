"""An agent file's entry point: the order from the command line, the world's state folder, and one line and exit
code 2 for an :class:`~crashlab.errors.AgentError` instead of a traceback -- a world that is not running included,
said before the agent starts anything -- and one line for each retry an engine logs (:mod:`.retries`)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Callable
from urllib.parse import urlsplit

from crashlab.agent.retries import one_line_retries
from crashlab.envnames import ENV_SERVICES_URL, state_dir
from crashlab.errors import HOW_TO_START, AgentError, WorldNotRunning
from crashlab.eventlog import CorruptLogError
from crashlab.order import ORDER_ID, check_order_id


def order_argument(text: str) -> str:
    try:
        return check_order_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_world_running() -> None:
    """WorldNotRunning, in one line, unless something listens at the world's address. A connection is opened and
    closed, nothing is sent: the world sees no request. Checked once, as the agent starts: an engine's retries meet
    an outage that comes later, and wait it out."""
    url = os.environ.get(ENV_SERVICES_URL)
    if not url:
        raise WorldNotRunning(f"{ENV_SERVICES_URL} is not set, so there is no world to work in; {HOW_TO_START}")
    try:
        where = urlsplit(url)
        address = (where.hostname or "", where.port or (443 if where.scheme == "https" else 80))
    except ValueError:
        raise WorldNotRunning(f"{ENV_SERVICES_URL}={url!r} is not a URL like http://127.0.0.1:8123; "
                              f"{HOW_TO_START}") from None
    try:
        socket.create_connection(address, timeout=5).close()
    except OSError as exc:
        raise WorldNotRunning(f"no world is running at {url} ({exc.strerror or type(exc).__name__}); "
                              f"{HOW_TO_START}") from None


def agent_main(run: Callable[[str], Any], argv: list[str] | None = None) -> None:
    """The command line every agent file shares: ``python AGENT.py --order ORD-8842``.

    Errors the agent cannot recover from -- the course's own errors, a damaged event log, no world to work in --
    are printed as one clear line (exit code 2), not a traceback. The engines' retry warnings are one line each.
    """
    parser = argparse.ArgumentParser(description="Run an order to completion, or resume it.")
    parser.add_argument("--order", default=ORDER_ID, type=order_argument, help="the order id (default %(default)s)")
    args = parser.parse_args(argv)
    one_line_retries()
    try:
        check_world_running()
        run(args.order)
    except (AgentError, CorruptLogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


__all__ = ["agent_main", "check_world_running", "order_argument", "state_dir"]
