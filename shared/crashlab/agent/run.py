"""An agent file's entry point: the order from the command line, the world's state folder, and one line and exit
code 2 for an :class:`~crashlab.errors.AgentError` instead of a traceback."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from crashlab.envnames import state_dir
from crashlab.errors import AgentError
from crashlab.eventlog import CorruptLogError
from crashlab.order import ORDER_ID, check_order_id


def order_argument(text: str) -> str:
    try:
        return check_order_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def agent_main(run: Callable[[str], Any], argv: list[str] | None = None) -> None:
    """The command line every agent file shares: ``python AGENT.py --order ORD-8842``.

    Errors the agent cannot recover from -- the course's own errors and a damaged event log -- are printed
    as one clear line (exit code 2), not a traceback.
    """
    parser = argparse.ArgumentParser(description="Run an order to completion, or resume it.")
    parser.add_argument("--order", default=ORDER_ID, type=order_argument, help="the order id (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        run(args.order)
    except (AgentError, CorruptLogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


__all__ = ["agent_main", "order_argument", "state_dir"]
