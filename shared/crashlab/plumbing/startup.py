"""Start-up cost of the library's own command-line processes."""

from __future__ import annotations

import sys


def skip_unused_slow_imports() -> None:
    """Keep ``rfc3987_syntax`` out of this process.

    nbformat imports jsonschema, and jsonschema imports ``rfc3987_syntax`` when it is installed (jupyter's
    ``jsonschema[format-nongpl]`` installs it) for one thing only: checking the ``"iri"`` string format, which
    nbformat never asks for (it validates with fastjsonschema, and without format checks). Importing it builds a
    Lark parser: about 1.6 s of CPU in every process that reads a notebook. Called by the library's own
    processes (the grader's notebook runner and batch worker, the Gradescope entry, the ``crashlab`` command),
    never in a learner's kernel; a process that has already imported either keeps it."""
    if "rfc3987_syntax" not in sys.modules and "jsonschema" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # ``import rfc3987_syntax`` raises ImportError, which jsonschema expects
