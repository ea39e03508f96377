"""Running agent processes for the harness: one run seen from outside (:class:`ProcessRun`), a run with or
without a crash point armed in the world, and the bookkeeping that lets Ctrl-C (or SIGTERM, in the CLI) end
every process a crash test's rows have running at once (:class:`CrashTestAgents`) instead of letting them run on to
their timeout.

Whatever an agent does, a run ends: every kill takes the agent's process group and everything it started
(:mod:`crashlab.plumbing.processes`), and no wait is without a timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from crashlab.errors import CrashlabError
from crashlab.plumbing import processes
from crashlab.plumbing import sandbox as sandboxes
from crashlab.course.metadata import LauncherKind
from crashlab.engines.registry import student_env
from crashlab.harness.launcher import WarmLauncher, WarmProcess, kept_launcher
from crashlab.order import ORDER_ID
from crashlab.world.runscope import RunScope, run_scope
from crashlab.plumbing.scratch import make_scratch, remove_scratch
from crashlab.world import World


@dataclass
class ProcessRun:
    """One agent process, seen from outside."""

    pid: int
    returncode: int | None
    started: float
    ended: float
    stdout: str
    stderr: str
    timed_out: bool = False
    crashed_at: str | None = None  # the crash point the world saw this run reach, and that killed this process
    crash_note: str | None = None  # why a point the world saw does not count as this run's crash, if it does not

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    def last_error_line(self, width: int = 600) -> str:
        """The agent's last words, for a verdict: at most ``width`` characters, shortened at a word (an agent's
        output is the student's, and what reaches feedback from it is bounded)."""
        import textwrap

        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        if not lines:
            return f"exit code {self.returncode}"
        return textwrap.shorten(lines[-1].strip(), width=width, placeholder=" [...]")


def run_python(args: list[str], env: dict | None = None, timeout: float = 60.0,
               cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``python ARGS...`` as a new process that runs a learner's code: in a session of its own, and as
    the sandbox user while grading as root. Use it instead of ``subprocess.run([sys.executable, ...])``."""
    env = sandboxes.child_env(dict(os.environ if env is None else env), engines=student_env())
    process = subprocess.Popen([sys.executable, *map(str, args)], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                               preexec_fn=sandboxes.preexec())
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.kill_tree(process.pid)
        stdout, stderr = processes.collect(process)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def run_agent(agent: str | Path, world: World, order_id: str = ORDER_ID, *, crash_at: str | None = None,
              timeout: float = 60.0, extra_env: dict | None = None,
              launcher: WarmLauncher | LauncherKind | None = "warm", args: list[str] | None = None) -> ProcessRun:
    """Run ``python AGENT --order ORDER_ID`` once as a new process, in the agent file's directory.

    With ``crash_at`` the world is armed first, for ``order_id`` and this run alone (its processes are marked
    from outside: :mod:`crashlab.world.runscope`), and kills the whole run when one of them makes the request for that
    point; ``ProcessRun.crashed_at`` then says what the world saw, once the run's first process died of it.
    ``launcher``: see :func:`start_agent`; either way the agent is a new process that is killed for real.
    """
    if not crash_at:
        return start_agent(agent, world, order_id, extra_env=extra_env, launcher=launcher, args=args).finish(timeout)
    # A crashed run takes every process it started with it, as a machine that crashes does (see
    # crashlab.plumbing.sandbox.crash_user): nothing it forked off can finish the order behind the resume's back.
    with sandboxes.crash_user(hand_back=(world.agent_dir, Path(agent).resolve().parent)) as row, \
            run_scope(uid=row.uid if row is not None else None) as scope:
        world.arm_crash(crash_at, order_id, scope)
        try:
            running = start_agent(agent, world, order_id, extra_env=extra_env, launcher=launcher, args=args,
                                  scope=scope)
            if scope.by_tree:
                world.crash_run_started(running.process.pid)
            run = running.finish(timeout, crash_world=world)
        finally:
            world.arm_crash(None)
            sandboxes.kill_crashed()
    return run


class AgentEnvironment(Protocol):
    """What an agent process is started in: a :class:`~crashlab.world.World`, or anything that gives its environment
    (the soak's snapshot of a world taken at a round's start)."""

    def env(self, **extra: str) -> dict[str, str]: ...


class RowsStopped(CrashlabError, RuntimeError):
    """The crash test is being stopped (Ctrl-C): its rows start no more agent processes."""


class CrashTestAgents:
    """The agent processes that one crash test's rows have running, so that Ctrl-C can end them all at once.

    Each row runs in a worker thread that knows its crash test through :data:`_row_context`; every agent it
    starts (:func:`start_agent`) is registered here until it has been waited for."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[RunningAgent] = set()
        self.stopped = False

    def run(self, function, *args, **kwargs):
        """Call ``function`` in this thread as a row of this crash test."""
        _row_context.rows = self
        try:
            return function(*args, **kwargs)
        finally:
            _row_context.rows = None

    def add(self, running: "RunningAgent") -> bool:
        """Register a process just started; False if the crash test is being stopped (the caller ends it)."""
        with self._lock:
            if not self.stopped:
                self._running.add(running)
            return not self.stopped

    def discard(self, running: "RunningAgent") -> None:
        with self._lock:
            self._running.discard(running)

    def stop(self) -> None:
        """Kill every agent process the rows have running (each with its group), and let no row start another:
        the rows then end within moments, instead of running on to their timeout."""
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for each in running:
            each.kill()


_row_context = threading.local()


def _current_rows() -> CrashTestAgents | None:
    return getattr(_row_context, "rows", None)


class RunningAgent:
    """An agent process that has been started and not yet waited for: what :func:`start_agent` gives a notebook,
    to wait for with :meth:`finish` or to kill."""

    def __init__(self, process, started: float, output_dir: Path | None):
        self.process, self.started, self.output_dir = process, started, output_dir
        self.rows = _current_rows()
        if self.rows is not None and not self.rows.add(self):  # started as the crash test was being stopped
            self.finish(0)  # killed, waited for, its output folder removed
            raise RowsStopped("the crash test was stopped")

    def finish(self, timeout: float, crash_world: World | None = None) -> ProcessRun:
        """Wait for the process (its whole group dies at ``timeout``). With ``crash_world``, watch the
        world: once it reports the armed point reached (it has killed the run), make sure the process is dead."""
        timed_out, crashed = False, None
        deadline = self.started + timeout
        try:
            while self.process.poll() is None:
                if time.time() > deadline:
                    timed_out = True
                    break
                if crash_world is not None and crashed is None:
                    crashed = crash_world.crash_reached()
                    if crashed:
                        break
                self._wait(0.05 if crash_world is not None else min(0.5, max(0.01, deadline - time.time())))
        finally:  # also on an error or Ctrl-C: nothing is left running, and every wait below is bounded
            if self.process.poll() is None:
                self.kill()
            self._wait(30)
            stdout, stderr = self._output()
            if self.rows is not None:
                self.rows.discard(self)
        ended = time.time()
        if crash_world is not None and crashed is None:
            crashed = crash_world.crash_reached()
        point, note = self._crash_of(crashed)
        return ProcessRun(self.process.pid, self.process.returncode, self.started, ended, stdout, stderr,
                          timed_out, point, note)

    def _crash_of(self, crashed: dict | None) -> tuple[str | None, str | None]:
        """The point the world saw, if it counts as this run's crash -- the run's first process was among those
        the world killed, and died of SIGKILL -- else None and why not. A run that leaves a process behind and
        ends (or was killed by the harness for its timeout) did not crash there, whatever that process reached."""
        if not crashed:
            return None, None
        point, code = crashed["point"], self.process.returncode
        if self.process.pid not in crashed.get("killed", ()):
            ended = f"exited with code {code}" if code is not None and code >= 0 else "ended"
            return None, (f"the world saw {point} from a process the run left behind, after its first process had "
                          f"{ended}: a crash point counts only when it kills the run")
        if code != -signal.SIGKILL:
            return None, f"the world killed the run at {point}, but its first process ended otherwise (exit code {code})"
        return point, None

    def running(self) -> bool:
        """True until the process has exited (or been killed)."""
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the process and its whole group now, and every process below it even in a group of its
        own: a crash from outside, at a moment you choose."""
        if self.process.returncode is None:  # never signal an id the system may have given to another process
            born = self.process.born if isinstance(self.process, WarmProcess) else None  # a Popen is ours to reap
            processes.kill_tree(self.process.pid, born)

    def _wait(self, seconds: float) -> None:
        try:
            self.process.wait(seconds)
        except subprocess.TimeoutExpired:
            pass

    def _output(self) -> tuple[str, str]:
        """What the process wrote, read within a bounded time; its scratch folder is removed."""
        if isinstance(self.process, subprocess.Popen):
            return processes.collect(self.process)
        try:
            return self.process.output()
        finally:
            remove_scratch(self.output_dir)


def start_agent(agent: str | Path, world: AgentEnvironment, order_id: str = ORDER_ID, *, extra_env: dict | None = None,
                launcher: WarmLauncher | LauncherKind | None = "warm", args: list[str] | None = None,
                scope: RunScope | None = None) -> RunningAgent:
    """Start one agent process in a process group of its own (as the sandbox user while grading).
    ``launcher``: ``"warm"`` (the default): forked from this process's kept launcher
    (:func:`~crashlab.harness.launcher.kept_launcher`), which has the SDK imported already -- a new interpreter
    spends 1.3 s to 2 s of CPU importing it, in every run. None or ``"exec"``: ``python AGENT`` in a new
    interpreter, a child of this process. A :class:`~crashlab.harness.launcher.WarmLauncher`: forked from that one.
    Either way the agent is a process of its own, killed for real, and starts clean: the launcher never runs agent
    code (see :mod:`crashlab.harness.launcher`)
    ``args`` replaces the default command line ``--order ORDER_ID``. ``scope``: the run's mark, which the
    process takes on before any of the agent's code runs (its cgroup, see :mod:`crashlab.world.runscope`)."""
    agent = Path(agent).resolve()
    argv = [str(a) for a in args] if args is not None else ["--order", order_id]
    env = sandboxes.child_env(world.env(**(extra_env or {})), engines=student_env())
    started = time.time()
    if isinstance(launcher, str) and launcher not in ("warm", "exec"):
        raise ValueError("launcher must be a WarmLauncher, 'warm', 'exec' or None")
    rows = _current_rows()
    if rows is not None and rows.stopped:
        raise RowsStopped("the crash test was stopped")
    if launcher == "warm":
        launcher = kept_launcher()
    process: subprocess.Popen[str] | WarmProcess
    if launcher is None or launcher == "exec":
        process = subprocess.Popen([sys.executable, str(agent), *argv], cwd=agent.parent, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                   start_new_session=True,
                                   preexec_fn=scope.preexec(sandboxes.preexec()) if scope else sandboxes.preexec())
        return RunningAgent(process, started, None)
    output_dir = make_scratch("crashlab-agent-output-")  # removed by RunningAgent.finish()
    try:
        sandboxes.give(output_dir)
        process = launcher.spawn([str(agent), *argv], agent.parent, env, output_dir / "stdout",
                                 output_dir / "stderr", cgroup=scope.cgroup if scope else None)
    except BaseException:
        remove_scratch(output_dir)
        raise
    return RunningAgent(process, started, output_dir)
