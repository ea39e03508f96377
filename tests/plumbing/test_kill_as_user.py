"""Killing every process of a sandbox user is done as that user (``kill -1`` reaches all of them in one pass), but
the process that becomes the user must never be a copy of the caller's memory. With ``subprocess``'s ``user=``, the
child forked from the grader became the user and only then exec'd the shell: for that moment a process of the user
held the grader's memory, its secrets included (the sampler of tests/grading/test_redteam_box.py caught one so on a
loaded run). The child now stays root until it execs setpriv, which becomes the user and execs the shell."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from crashlab.plumbing import sandbox_users
from crashlab.plumbing.sandbox_slot import SandboxSlot

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="sandbox users need root")


def test_every_process_of_the_user_dies_and_the_fork_becomes_the_user_only_after_its_exec(tmp_path, monkeypatch):
    assert shutil.which("setpriv"), "util-linux's setpriv is on every Debian and Ubuntu"
    with SandboxSlot(tmp_path) as sandbox:
        sleepers = [subprocess.Popen(["sleep", "60"], user=sandbox.uid, group=sandbox.gid, extra_groups=[])
                    for _ in range(3)]
        calls: list[tuple[tuple, dict]] = []
        run = subprocess.run
        with monkeypatch.context() as patched:
            patched.setattr(sandbox_users.subprocess, "run", lambda *a, **k: calls.append((a, k)) or run(*a, **k))
            sandbox_users.kill_every_process_of(sandbox.uid, sandbox.gid)
        assert [sleeper.wait(10) for sleeper in sleepers] == [-9] * 3
    [(args, kwargs)] = calls
    assert not {"user", "group", "extra_groups", "preexec_fn"} & set(kwargs), \
        f"the forked child becomes the user itself, before its exec: {sorted(kwargs)}"
    assert args[0][0] == shutil.which("setpriv") and f"--reuid={sandbox.uid}" in args[0] and kwargs["env"] == {}
