"""What the model client and the tool client share: how to reach the world, and one TLS context per process.

Every httpx client builds a TLS context, loading the whole certificate store (about 20 ms of CPU), even for the
world's plain-http URL; and httpx.post() makes a new client per call. The clients share :data:`TLS`, built once
per process (the warm launcher builds it as it imports this module, before it forks the agents)."""

from __future__ import annotations

import httpx

from crashlab.errors import HOW_TO_START
from crashlab.plumbing.tracebacks import cut_at_word

TLS = httpx.create_ssl_context()


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line, bounded after a whole word (an error cut mid-token reads as another error)."""
    return cut_at_word(" ".join(str(text).split()), limit)


__all__ = ["HOW_TO_START", "TLS", "one_line"]
