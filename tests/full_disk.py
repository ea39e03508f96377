"""A disk that is full, for the tests of what each writer says then: a tiny tmpfs mounted for the test (root only;
the tests that need one skip otherwise), filled to its last block."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest


@contextlib.contextmanager
def tiny_disk(folder: Path, size: str = "256k"):
    """A tmpfs of ``size`` mounted at ``folder`` for the block, unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> None:
    """Write into ``folder`` until its disk refuses one more byte."""
    with open(folder / "filler", "ab", buffering=0) as f:
        block = b"\0" * 4096
        with contextlib.suppress(OSError):
            while True:
                f.write(block)
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0")
