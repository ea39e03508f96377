"""The operating-system plumbing every layer above stands on: processes and their trees, the grader's sandbox,
scratch folders, ports, the servers' supervisor, locks chosen once, files never overwritten, tracebacks cut to
the student's own frames. Nothing here knows about orders, worlds, engines or lessons."""

from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent  # the crashlab package's folder, found without importing it

__all__ = ["LIBRARY"]
