"""Scratch folders go when their run ends: a folder an agent made read-only, and grading's own; and those of a
run killed by SIGKILL go at the next start, never those of a live process or folders that are not ours.

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
from crashlab.plumbing.process_tree import start_time
from crashlab.plumbing.scratch import make_scratch, scratch_dir, sweep_scratch

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
        with scratch_dir("crashlab-x-", dir=tmp_path) as path:
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


def gone_owner() -> tuple[int, int]:
    """The pid and start time of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "import os; print(open('/proc/self/stat').read())"],
                             stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=60)
    return child.pid, int(out.rpartition(")")[2].split()[19])


def test_the_next_start_sweeps_what_a_killed_owner_left_and_nothing_else(tmp_path):
    pid, start = gone_owner()
    dead = tmp_path / f"crashlab-grade-{pid}.{start}-abcd_123"
    live = make_scratch("crashlab-matrix-", dir=tmp_path)  # ours: this process runs
    me = os.getpid()
    reused = tmp_path / f"crashlab-world-{me}.{start_time(me) - 1}-abcd_123"  # our pid, an earlier process's
    not_ours = [tmp_path / "crashlab-grade-abcd_123",  # no owner in its name (an older release's)
                tmp_path / f"my-notes-{pid}.{start}-abcd_123",  # not our prefix
                tmp_path / f"crashlab-grade-{pid}.{start}-abcd_123.txt"]  # a file, not a folder
    for folder in (dead, reused, not_ours[0], not_ours[1]):
        (folder / "ledgers").mkdir(parents=True)
        (folder / "ledgers" / "charges.db").write_text("x")
    not_ours[2].write_text("notes")
    link = tmp_path / f"crashlab-rows-{pid}.{start}-abcd_123"
    link.symlink_to(not_ours[0], target_is_directory=True)  # a link is removed by no one, nor what it points at
    assert sorted(sweep_scratch(tmp_path)) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists()
    assert live.is_dir() and all(path.exists() for path in not_ours) and link.is_symlink()
    assert (not_ours[0] / "ledgers" / "charges.db").exists()


def test_a_folder_of_another_user_is_not_swept(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can make a folder another user owns")
    pid, start = gone_owner()
    theirs = tmp_path / f"crashlab-grade-{pid}.{start}-abcd_123"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    assert sweep_scratch(tmp_path) == [] and theirs.is_dir()


def test_a_command_sweeps_at_its_start(tmp_path):
    """The CLI's entry sweeps the temporary folder (TMPDIR): a command that only prints its help does it too."""
    pid, start = gone_owner()
    dead = tmp_path / f"crashlab-soak-{pid}.{start}-abcd_123"
    dead.mkdir()
    run = subprocess.run([sys.executable, "-m", "crashlab.cli", "world", "--help"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(LIBRARY)})
    assert run.returncode == 0, run.stderr
    assert not dead.exists()


def test_a_notebook_sweeps_when_it_imports_the_lessons_facade(tmp_path):
    """A kernel killed by SIGKILL (Jupyter's restart, an out-of-memory kill) left its matrices' folders: the next
    notebook's first import removes them."""
    pid, start = gone_owner()
    dead = tmp_path / f"crashlab-matrix-{pid}.{start}-abcd_123"
    dead.mkdir()
    run = subprocess.run([sys.executable, "-c", "import crashlab.lessons"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(LIBRARY)})
    assert run.returncode == 0, run.stderr
    assert not dead.exists()
