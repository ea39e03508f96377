"""Scratch folders go when their run ends: a folder an agent made read-only, and grading's own.

The matrices' folders are checked in ``test_harness.py`` (a whole crash test in a private TMPDIR).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import crashlab
from crashlab.grading.isolation import Isolation
from crashlab.plumbing.scratch import scratch_dir

LIBRARY = Path(crashlab.__file__).resolve().parents[1]

READ_ONLY_TREE = """
import os, sys
from crashlab.plumbing.scratch import remove_scratch
root, outside = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(root, "a", "b"))
os.makedirs(os.path.join(root, "a", "c"))
os.makedirs(outside)
open(os.path.join(root, "a", "b", "file"), "w").close()
os.symlink(outside, os.path.join(root, "a", "c", "link"))
os.chmod(outside, 0o500)
os.chmod(os.path.join(root, "a", "b"), 0o500)  # its file cannot be deleted
os.chmod(os.path.join(root, "a", "c"), 0o500)  # nor its symlink
os.chmod(os.path.join(root, "a"), 0o000)       # it cannot even be listed
remove_scratch(root)
print("left" if os.path.exists(root) else "gone", oct(os.stat(outside).st_mode & 0o777))
"""


def as_a_learner() -> list[str]:
    """A command prefix under which permission bits hold, as for a learner: nothing when not root; as
    root, dropping the capabilities that override them."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("root, and no setpriv to drop the capabilities that override permission bits")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def test_a_folder_an_agent_made_read_only_is_removed_all_the_same(tmp_path):
    run = subprocess.run([*as_a_learner(), sys.executable, "-c", READ_ONLY_TREE, str(tmp_path / "scratch"),
                          str(tmp_path / "outside")],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(LIBRARY)})
    subprocess.run(["chmod", "-R", "u+rwx", str(tmp_path)], check=False)  # so pytest can clean up after a failure
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["gone", "0o500"]  # and nothing was changed through the symlink


def test_scratch_dir_is_removed_on_error(tmp_path):
    try:
        with scratch_dir("x-", dir=tmp_path) as path:
            (path / "file").write_text("x")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_submissions_processes_get_a_temporary_folder_inside_its_own(tmp_path):
    """A matrix that the submission runs and that is killed at the deadline leaves its scratch folders
    there, and they go with the submission's folder."""
    isolation = Isolation(tmp_path, False, hide=())
    try:
        tmp = Path(isolation.env(trusted=False)["TMPDIR"])
        assert tmp == tmp_path / "home" / "tmp" and tmp.is_dir()
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o1777  # crash users make folders there too, as in /tmp
        # the judge's too: the worlds its checks start keep their agents' folders there, which the sandbox's view
        # of the machine shows (their ledgers are in the grader's private folder)
        assert isolation.env(trusted=True).get("TMPDIR") == str(tmp)
    finally:
        isolation.close()
    assert not isolation.private.exists()
