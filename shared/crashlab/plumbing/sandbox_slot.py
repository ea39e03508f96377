"""A sandbox user for one grading run at a time: eight slots, each a file lock and a system user of its own
(with crash users for the crash matrices' rows, and a reference user with crash users of its own for the runs on
the master's answers), made on first use."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import subprocess
import time
from dataclasses import asdict, replace
from pathlib import Path

from crashlab.plumbing.sandbox import CRASH_USERS, SLOT_DIR, SLOTS, VIEW_ROOT, Sandbox, SandboxError, can_isolate
from crashlab.plumbing.sandbox_view import CLONE_NEWIPC, CLONE_NEWNS, can_hide


class SandboxSlot:
    """Hold one sandbox user for a grading run (a file lock per slot), creating the user on demand."""

    def __init__(self, home: Path, hide: tuple = (), wait: float = 120.0, see: tuple = (),
                 reference: tuple[Path, tuple] | None = None):
        """``see``, ``hide``: see :class:`crashlab.plumbing.sandbox.Sandbox`; ``reference``: (home, see) of the
        reference user's runs."""
        if not can_isolate():
            raise SandboxError("isolation needs root")
        self.hidden = bool(hide or see) and can_hide()
        self.ipc = self.hidden and can_hide(CLONE_NEWNS | CLONE_NEWIPC)
        if not self.hidden:
            hide = see = ()  # the uid still protects everything but what is world-readable (the masters)
        SLOT_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        VIEW_ROOT.mkdir(mode=0o755, exist_ok=True)
        deadline = time.monotonic() + wait
        self._lock = None
        while self._lock is None:
            for slot in range(SLOTS):
                handle = open(SLOT_DIR / f"slot{slot}.lock", "w")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                self._lock, self.slot = handle, slot
                break
            else:
                if time.monotonic() > deadline:
                    raise SandboxError(f"all {SLOTS} sandbox slots are busy")
                time.sleep(0.5)
        user = f"crashlab-sb{self.slot}"
        self.sandbox = _users(user, home, hide, see, self.ipc)
        if reference is not None:
            ref_home, ref_see = reference
            ours = _users(f"{user}r", ref_home, hide, ref_see if self.hidden else (), self.ipc)
            self.sandbox = replace(self.sandbox, reference=asdict(ours))
        self.sandbox.kill_all()  # whatever a crashed earlier run left behind
        self._remove_left_behind()

    def limit(self, cgroups: tuple) -> None:
        """Every process of the slot's users (the reference user's included) joins ``cgroups`` as it starts."""
        reference = self.sandbox.reference and {**self.sandbox.reference, "cgroups": tuple(cgroups)}
        self.sandbox = replace(self.sandbox, cgroups=tuple(cgroups), reference=reference)

    @property
    def _left_file(self) -> Path:
        return SLOT_DIR / f"slot{self.slot}.scratch"

    def leave_behind(self, folders) -> None:
        """Name the folders this run makes, so that if the grader dies without cleaning up (SIGKILL), the next
        run in this slot removes them before it starts: a submission never meets an earlier one's files."""
        self._left_file.write_text(json.dumps([str(f) for f in folders]))

    def _remove_left_behind(self) -> None:
        from crashlab.plumbing.scratch import remove_scratch

        try:
            folders = json.loads(self._left_file.read_text())
        except (OSError, ValueError):
            return
        for folder in folders if isinstance(folders, list) else ():
            if isinstance(folder, str) and os.path.basename(folder).startswith("crashlab-"):
                remove_scratch(folder)
        self._left_file.unlink(missing_ok=True)

    def close(self) -> None:
        if self._lock is not None:
            self.sandbox.kill_all()
            self._left_file.unlink(missing_ok=True)
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Sandbox:
        return self.sandbox

    def __exit__(self, *exc) -> None:
        self.close()


def _users(user: str, home, hide, see, ipc: bool) -> Sandbox:
    """The sandbox of ``user`` (made on first use) and its crash users (in its group)."""
    entry = _ensure_user(user)
    crash_users = tuple((_ensure_user(f"{user}c{k}", group=user).pw_uid, f"{user}c{k}") for k in range(CRASH_USERS))
    return Sandbox(entry.pw_uid, entry.pw_gid, user, str(home), tuple(str(p) for p in hide), crash_users,
                   tuple(str(p) for p in see), ipc=ipc)


def _ensure_user(name: str, group: str | None = None) -> pwd.struct_passwd:
    """A system user, made on first use: with a group of its own, or in ``group`` (a crash user shares its
    slot user's group)."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    grouping = ["--gid", group] if group else ["--user-group"]
    result = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                             "--shell", "/usr/sbin/nologin", *grouping, name],
                            capture_output=True, text=True)
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(f"cannot create the sandbox user {name}: {result.stderr.strip()}") from None
