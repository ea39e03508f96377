"""Run a master notebook top to bottom and save it with its outputs (what authors commit)."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat


def execute_in_place(path: Path, timeout: int = 600) -> float:
    from nbclient import NotebookClient

    started = time.time()
    nb = nbformat.read(path, as_version=4)
    from crashlab.course.notebooks import QUIET_KERNEL

    NotebookClient(nb, timeout=timeout, kernel_name="python3", extra_arguments=QUIET_KERNEL,
                   resources={"metadata": {"path": str(path.parent.resolve())}}).execute()
    nbformat.write(nb, path)
    return time.time() - started
