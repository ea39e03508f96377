"""Start agent processes: a fresh interpreter each time, or forked from a warm one.

Every agent run is a new OS process with its own pid, killed for real with SIGKILL. What differs is
how it starts:

- ``exec``: ``python AGENT.py --order ID``, a brand-new interpreter. Honest to the last byte, but each start
  pays for importing the ``anthropic`` SDK (about 1.7 s of building pydantic models).
- ``warm``: a launcher process imports the heavy libraries once and then forks one child per run; the child sets
  its own environment, working directory and ``sys.argv`` and runs the agent file as ``__main__``. The launcher
  never runs agent code itself, so every child starts clean: no agent module, no log and no counter carries over
  from an earlier run. A start costs about 0.05 s.

Both give the same crash matrix (the test suite checks it on real agents); ``warm`` makes whole matrices fast
enough to run inside a lesson. The launcher's protocol is framed JSON over two pipes, single-threaded, so forking
is safe; the launcher's own process is :mod:`crashlab.harness.launcher_process`.

Every agent inherits the launcher's memory, so nothing secret may ever be in it: the launcher starts with an
allow-listed environment (:func:`crashlab.plumbing.sandbox.launcher_env`, never the grader's own, whose strings
would stay on its stack whatever it sets afterwards), and each request's payload -- the child's environment, which
for a world holds its admin token and for a learner's agent their API key -- is read into memory that the launcher
unmaps as soon as it has forked: only the child it was meant for parses it.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.plumbing.processes import born_of, kill_group
from crashlab.plumbing.tracebacks import cut_at_word

DEFAULT_PRELOAD = ("anthropic", "httpx", "crashlab.agent")


class LauncherError(CrashlabError, RuntimeError):
    pass


class WarmProcess:
    """A child of the warm launcher, with the parts of ``subprocess.Popen`` the harness uses."""

    def __init__(self, launcher: "WarmLauncher", pid: int, stdout: Path, stderr: Path):
        self._launcher = launcher
        self.pid = pid
        # The launcher reaps this child, and the id may be given away before its "exited" message is read: a kill
        # checks the id still names the process that started now.
        self.born = born_of(pid)
        self.returncode: int | None = None
        self._stdout, self._stderr = stdout, stderr

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._launcher._wait_exit(self.pid, timeout)
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the child's whole process group (it leads one), not just the child."""
        if self.returncode is None:
            kill_group(self.pid, self.born)

    def output(self) -> tuple[str, str]:
        return _read_own_file(self._stdout), _read_own_file(self._stderr)


def _read_own_file(path: Path) -> str:
    """What an agent wrote to its output file; never a file a planted symlink points at."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        return f.read(1 << 20).decode(errors="replace")


class _ForkedLauncher:
    """The launcher as a fork of this process, with the parts of ``subprocess.Popen`` that :class:`WarmLauncher`
    uses. The child keeps only the two pipes and the log, leads a session of its own, and never returns into the
    caller's code: it serves until its request pipe closes, then exits."""

    def __init__(self, req_read: int, rep_write: int, log: int, preload: tuple[str, ...]):
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                os.setsid()
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                for fd in (1, 2):
                    os.dup2(log, fd)
                keep = sorted({0, 1, 2, req_read, rep_write})
                for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")]):
                    os.closerange(low + 1, high)  # the caller's files and pipes are not the launcher's
                from crashlab.harness.launcher_process import serve

                serve(req_read, rep_write, list(preload))
                code = 0
            finally:
                os._exit(code)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (a subreaper's sweep): gone all the same
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if timeout is not None and deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return code


class WarmLauncher:
    """One warm interpreter that forks agent processes on request. Use as a context manager."""

    def __init__(self, preload: tuple[str, ...] | list[str] = DEFAULT_PRELOAD, start_timeout: float = 60.0,
                 fork: bool = False):
        """``fork``: the launcher is a fork of this process instead of a new interpreter (see
        :func:`fork_kept_launcher`, the only caller that may ask for it)."""
        self.preload = tuple(dict.fromkeys((*DEFAULT_PRELOAD, *preload)))
        req_read, self._req_write = os.pipe()
        self._rep_read, rep_write = os.pipe()
        # The launcher's own output goes to a file of its own, never to ours: in a notebook, whatever a helper
        # process writes to the kernel's stderr shows up in the cell that happens to be running.
        self._log = tempfile.TemporaryFile()
        self._process: _ForkedLauncher | subprocess.Popen[bytes]
        if fork:
            self._process = _ForkedLauncher(req_read, rep_write, self._log.fileno(), self.preload)
        else:
            from crashlab.engines.registry import student_env
            from crashlab.plumbing.sandbox import launcher_env

            self._process = subprocess.Popen(
                [sys.executable, "-P", "-m", "crashlab.harness.launcher", str(req_read), str(rep_write),
                 *self.preload],
                pass_fds=(req_read, rep_write), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                start_new_session=True, env=launcher_env(dict(os.environ), engines=student_env()))
        for fd in (req_read, rep_write):  # the launcher's ends
            os.close(fd)
        self._lock, self._cond = threading.Lock(), threading.Condition()
        self._replies: dict[str, dict] = {}
        self._exits: dict[int, int] = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()
        ready = self._await(lambda: self._replies.pop("ready", None), start_timeout)
        if ready is None or not ready.get("ok"):
            error = (ready or {}).get("error") or self._last_words() or "no answer"
            self.close()
            raise LauncherError(f"the warm launcher did not start ({error})")

    def _last_words(self) -> str:
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return cut_at_word(lines[-1], 300) if lines else ""

    def _read_replies(self) -> None:
        with os.fdopen(self._rep_read, "r") as replies:
            for line in replies:
                message = json.loads(line)
                with self._cond:
                    if "exited" in message:
                        self._exits[message["exited"]] = message["code"]
                    else:
                        self._replies[message["id"]] = message
                    self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _await(self, take, timeout: float | None):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                value = take()
                if value is not None or self._closed:
                    return value
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def spawn(self, argv: list[str], cwd: str | Path, env: dict[str, str], stdout: Path, stderr: Path,
              cgroup: str | None = None, module: str | None = None) -> WarmProcess:
        """Fork one agent process; ``cgroup``: the run's cgroup, joined before any agent code runs (see
        :mod:`crashlab.world.runscope`). ``module``: the library's own ``python -m MODULE ARGV`` instead (a world's
        server), which keeps this process's user and no limits, and appends to ``stderr``."""
        from dataclasses import asdict

        from crashlab.plumbing.sandbox import current

        from crashlab.plumbing.sandbox_box import netns_id, thread_netns_path
        from crashlab.plumbing.sandbox_users import fs_ids

        sandbox = current() if os.geteuid() == 0 and not module else None  # the child drops to it after the fork
        # Born in the network namespace of the thread that asks (a grading's box), and opening its output files with
        # that thread's file rights (a judge works with the student's: see crashlab.grading.judge).
        where = {"netns": thread_netns_path(), "netns_id": netns_id(), "fs_ids": fs_ids(), "module": module}
        payload = {"argv": [str(a) for a in argv], "cwd": str(cwd), "env": env, "stdout": str(stdout),
                   "stderr": str(stderr), "sandbox": sandbox and asdict(sandbox), "cgroup": cgroup}
        reply = self._request(where, 30, payload)
        if reply is None or "pid" not in reply:
            raise LauncherError(f"the warm launcher did not start the agent ({(reply or {}).get('error', 'no answer')})")
        return WarmProcess(self, reply["pid"], Path(stdout), Path(stderr))

    def add_preload(self, modules: tuple[str, ...] | list[str], timeout: float = 60.0) -> None:
        """Import ``modules`` into the running launcher too, for the agents it forks from now on: a second engine
        costs its own import, not the SDK's again. :class:`LauncherError` if one cannot be imported, or if that
        started a thread (the launcher then refuses to fork)."""
        missing = [name for name in dict.fromkeys(modules) if name not in self.preload]
        if not missing:
            return
        reply = self._request({"import": missing}, timeout)
        if reply is None or not reply.get("ok"):
            raise LauncherError(f"the warm launcher could not import {', '.join(missing)} "
                                f"({(reply or {}).get('error') or self._last_words() or 'no answer'})")
        self.preload = (*self.preload, *missing)

    def _request(self, message: dict, timeout: float, payload: dict | None = None) -> dict | None:
        """Send one request and wait for its reply (None if none came in ``timeout`` seconds). ``payload``: what only
        the forked child reads (see the module's docstring); the header says how long it is. Each part is framed by
        its length, so the launcher never reads a payload's bytes into memory it keeps."""
        from crashlab.harness.launcher_process import frame

        request_id = f"r{time.monotonic_ns()}-{threading.get_ident()}"
        body = json.dumps(payload).encode() if payload is not None else b""
        data = frame(json.dumps({"id": request_id, **message, "payload": len(body)}).encode()) + body
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._req_write, view):]
        return self._await(lambda: self._replies.pop(request_id, None), timeout)

    def _wait_exit(self, pid: int, timeout: float | None) -> int:
        code = self._await(lambda: self._exits.pop(pid, None), timeout)
        if code is None:
            raise subprocess.TimeoutExpired(str(pid), timeout or 0)
        return code

    def close(self) -> None:
        try:
            os.close(self._req_write)  # EOF: the launcher kills what is left of its children and exits
        except OSError:
            pass
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            kill_group(self._process.pid)  # it leads its own group (start_new_session)
            self._process.wait(10)
        self._log.close()

    @property
    def pid(self) -> int:
        """The launcher's own process: the parent of every agent process it forks."""
        return self._process.pid

    def alive(self) -> bool:
        """True while the launcher process runs and answers (its pipe to us is open)."""
        return not self._closed and self._reader.is_alive() and self._process.poll() is None

    def __enter__(self) -> "WarmLauncher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- one launcher, kept for the process's later crash tests -------------------------------------------------
_kept: tuple[int, WarmLauncher] | None = None
_kept_lock = threading.Lock()


def kept_launcher(preload: tuple[str, ...] | list[str] = (), start: bool = True) -> WarmLauncher | None:
    """The process's launcher, started on first use and kept for its later runs (``crash_test``, ``run_agent``),
    with ``preload`` imported into it if it was not yet: a new launcher would import the SDK again, 1.3 s to 2 s of
    CPU, and a lesson or a grading runs many matrices on several engines. It never runs agent code, so each agent
    still starts clean, with the environment, folder and sandbox of its own request (an earlier engine's libraries
    are only there, unused). A dead one is started again; the kept one ends with this process. ``start=False``:
    None rather than a new one, for a caller to whom a launcher is a saving only if it runs already."""
    global _kept
    wanted = tuple(dict.fromkeys((*DEFAULT_PRELOAD, *preload)))
    with _kept_lock:
        pid, launcher = _kept or (0, None)
        if launcher is not None and pid == os.getpid():
            if launcher.alive():
                try:
                    launcher.add_preload(wanted)
                    return launcher
                except LauncherError:  # it may not fork safely now: the next crash test starts a new one
                    _kept = None
                    launcher.close()
                    raise
            launcher.close()  # dead: its pipes and log are ours to close
            _kept = None
        if not start:
            return None
        launcher = WarmLauncher(wanted)
        _kept = (os.getpid(), launcher)
        return launcher


def fork_kept_launcher() -> bool:
    """Make this process's kept launcher a fork of this process, when that is both safe and a saving: the process
    has the SDK imported already (it was itself forked from a launcher) and runs one thread only. The judge
    calls it first thing, before it starts a thread and before it reads its job, so the launcher -- and every
    agent it forks -- holds the libraries and nothing of the grading. True if it did."""
    global _kept
    if threading.active_count() > 1 or not all(name in sys.modules for name in DEFAULT_PRELOAD):
        return False
    with _kept_lock:
        if _kept is not None and _kept[0] == os.getpid():
            return False
        _kept = (os.getpid(), WarmLauncher(fork=True))
        return True


def close_kept_launchers() -> None:
    global _kept
    with _kept_lock:
        pid, launcher = _kept or (0, None)
        if pid == os.getpid():
            _kept = None
    if launcher is not None and pid == os.getpid():
        launcher.close()


atexit.register(close_kept_launchers)


if __name__ == "__main__":  # the launcher process itself: see crashlab.harness.launcher_process
    from crashlab.harness.launcher_process import serve

    serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
    # Gone at once, its children killed: the interpreter's teardown of the engines it imported takes seconds (4 to
    # 6 s measured on a loaded 2-core machine), while a grading that was interrupted, or its caller's close(), waits.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
