"""Running a coroutine to its end from code that may already be inside an event loop (a notebook cell: the kernel
runs one, so ``asyncio.run`` there refuses)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")


def in_own_loop(coroutine_function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run an ``async`` function to the end from a notebook cell, whose kernel already runs an event loop (so
    ``asyncio.run`` there would refuse): in a thread with a loop of its own."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine_function(*args))  # type: ignore[arg-type]
        except BaseException as exc:  # handed back to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


__all__ = ["in_own_loop"]
