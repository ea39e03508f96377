"""Run a master notebook top to bottom and save it with its outputs (what authors commit).

The notebook is replaced atomically, as every other output is (:mod:`crashlab.plumbing.outputs`): the executed
notebook is written whole to a temporary file beside it and renamed over it, so a full disk, a kill or Ctrl-C
during the write leaves the master as it was, never half a file."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import nbformat

from crashlab.plumbing.outputs import Kind, write_output


def _notebook(path: Path) -> bool:
    try:
        nbformat.read(path, as_version=4)
    except Exception:  # nbformat raises several kinds for a file that is not a notebook
        return False
    return True


NOTEBOOK = Kind("a notebook", _notebook)


def execute_in_place(path: Path, timeout: int = 600) -> float:
    from nbclient import NotebookClient

    from crashlab.course.notebooks import QUIET_KERNEL

    started = time.time()
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", extra_arguments=QUIET_KERNEL,
                   resources={"metadata": {"path": str(path.parent.resolve())}}).execute()
    text = nbformat.writes(nb)
    nbformat.reads(text, as_version=4)  # what is written reads back as a notebook, before the old one goes
    # The master read above is the file replaced: it was a notebook then, and it must still be one now (a file
    # put there while the kernel ran is not replaced). Its permissions are kept.
    write_output(path, text if text.endswith("\n") else text + "\n", NOTEBOOK,
                 mode=stat.S_IMODE(path.stat().st_mode))
    return time.time() - started
