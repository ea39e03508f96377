"""The world as the harness holds it, :class:`World`: its server started, attached to and stopped, and its admin
API (crash points armed, faults injected, the audit read).
    with World.start(".crashlab/demo") as world:
        subprocess.run([sys.executable, "agent.py", "--order", "ORD-8842"], env=world.env())
        print(world.audit())
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import threading
import time
from pathlib import Path

from crashlab.crash_points import CrashPoint
from crashlab.plumbing.tracebacks import cut_at_word, failure_words
from crashlab.envnames import ENV_MODEL_URL, ENV_PRIVATE_DIR, ENV_SERVICES_URL, ENV_STATE_DIR
from crashlab.order import ORDER_ID
from crashlab.plumbing.processes import kill_group, kill_groups, signal_group
from crashlab.plumbing.sandbox import give
from crashlab.plumbing.scratch import make_scratch, remove_scratch
from crashlab.world.errors import WorldError
from crashlab.world.launch import server_options, start_server
from crashlab.world.folder import AGENT_DIR, LEDGERS, LOG_FILE, READY_FILE, empty_world_folder, take_folder
from crashlab.world.ledger import LedgerError
from crashlab.world.fault_admin import FaultAdmin, checked_order_id
from crashlab.world.screen_admin import ScreenAdmin

KEY_LEASE = 5.0  # seconds an idempotency key stays in flight before a retry may take it over


class World(FaultAdmin, ScreenAdmin):
    """A running world: one server process on 127.0.0.1 with its ledgers in ``state_dir``.

    ``state_dir/ledgers`` holds the world's ledgers; ``state_dir/agent`` is where agents keep their
    own durable state (event logs, checkpoints). Use :meth:`start` or :meth:`attach`.

    While grading (``CRASHLAB_PRIVATE_DIR`` set), the ledgers live in a folder of the grader's instead,
    out of the agents' reach, and are read only through the world's admin API, which needs the token
    this object holds and no agent is given.
    """

    def __init__(self, state_dir: Path, port: int, pid: int, process: subprocess.Popen | None = None,
                 token: str = "", ledger_dir: Path | None = None):
        self.state_dir = Path(state_dir)
        self.port = port
        self.pid = pid
        self._process = process
        self._stopped = False
        self._token = token
        self._ledger_dir = ledger_dir
        self._scratch = False  # a folder start() made in the temporary folder, removed by stop()
        self._stdout = None  # the server's stdout, read for its first line and kept open while it runs
        self._http = None  # one HTTP client for the admin API, made on first use (see _client)
        self._http_pid = 0
        self._http_lock = threading.Lock()

    # --- life cycle -----------------------------------------------------------------------------
    @classmethod
    def start(cls, state_dir: str | os.PathLike | None = None, *, fresh: bool = True, port: int = 0,
              timeout: float = 15.0, stop_with_parent: bool = True, key_lease: float | None = None,
              key_lifetime: float | None = None, launcher=None, result_bytes: int = 0) -> "World":
        """Start a world in its own process, with its state in ``state_dir``.

        The world deletes nothing it did not create. ``state_dir`` must not exist, be empty, or be a folder
        a world made (it carries the marker file ``.crashlab-world``); anything else -- a folder of the
        learner's, one that only looks like a world's, a file, a read-only folder -- is refused with a
        :class:`WorldError` that says what to do.

        ``fresh=True`` deletes the world's own files first, by name (its log, ledgers and the agents' state in
        ``agent/``; see :mod:`crashlab.world.folder`), leaving anything else in the folder: a clean world whose
        audit shows only what comes next. ``fresh=False`` (``crashlab world start --keep``) restarts a world on its own state: the ledgers,
        armed faults and agents' state of the last world in that folder are kept, as after a real outage of
        the services. Without ``state_dir`` the world lives in a scratch folder that :meth:`stop` removes.

        ``key_lease``: how long (seconds) an idempotency key stays in flight before a request with that
        key may take it over, in case the request that held it died with the world (see ``server.py``);
        None means :data:`KEY_LEASE`. ``key_lifetime``: how long (seconds) after its first use a completed
        key is remembered; after that it is forgotten and a request with it is a new effect, as at payment
        providers, which keep keys for about a day. None (the default) remembers keys for ever.

        With ``stop_with_parent`` the server exits on its own when this process dies, so a killed
        kernel or test run never leaves a server behind. ``launcher``: a running warm launcher to fork the server
        from (see :mod:`crashlab.world.launch`); by default a new interpreter.

        ``result_bytes``: a ``receipt`` of that many characters in each successful tool reply for an order of a backlog
        (the long task, :mod:`crashlab.backlog`), so that a long agent's conversation grows as a lesson wants; 0 (the
        default): none, and every other order's replies are as they always were.
        """
        options = server_options(KEY_LEASE if key_lease is None else key_lease, key_lifetime, result_bytes)
        scratch = not state_dir  # None or "": a scratch folder, as before
        state_dir = (Path(state_dir) if state_dir else make_scratch("crashlab-world-")).resolve()
        take_folder(state_dir)
        ready = state_dir / READY_FILE
        running = cls._from_ready_file(state_dir) if ready.exists() else None
        if running is not None:  # checked before emptying: never pull the ledgers from under a live world
            raise WorldError(f"a world is already running in {state_dir} (pid {running.pid}); "
                             f"use World.attach({str(state_dir)!r}) or stop it first")
        if fresh:
            empty_world_folder(state_dir)
        (state_dir / AGENT_DIR).mkdir(exist_ok=True)
        ready.unlink(missing_ok=True)
        token = secrets.token_hex(16)
        private = os.environ.get(ENV_PRIVATE_DIR)
        if private:  # grading: the server makes its ledger folder itself, where agents cannot reach
            ledgers, ready_arg = Path(private) / f"world-{token[:12]}", []
        else:
            ledgers, ready_arg = state_dir / LEDGERS, ["--ready-file", str(ready)]
        args = ["--state", str(ledgers), "--port", str(port), *options, *ready_arg]
        if stop_with_parent:
            args += ["--parent-pid", str(os.getpid())]
        give(state_dir)  # while grading as root, the agents (the sandbox user) keep their state here
        log_path = state_dir / LOG_FILE
        # the log is kept across --keep restarts: a failure quotes only this start's words
        logged = os.lstat(log_path).st_size if os.path.lexists(log_path) else 0
        env = {k: v for k, v in os.environ.items() if k != "CRASHLAB_SANDBOX"}
        env["CRASHLAB_WORLD_TOKEN"] = token
        process, stdout, line = start_server(args, env, log_path, timeout, launcher)
        if not line:
            process.kill()
            process.wait()
            stdout.close()
            said = failure_words(log_path.read_bytes()[logged:].decode(errors="replace"), process.returncode)
            if scratch:
                remove_scratch(state_dir)
            raise WorldError(f"the world server did not start ({said})" + ("" if scratch else f"; its log: {state_dir / LOG_FILE}"))
        info = json.loads(line)
        world = cls(state_dir, info["port"], info["pid"], process, token, ledgers)
        world._scratch, world._stdout = scratch, stdout
        return world

    @classmethod
    def attach(cls, state_dir: str | os.PathLike) -> "World":
        """Connect to a world started elsewhere (for example with ``crashlab world start``)."""
        state_dir = Path(state_dir).resolve()
        world = cls._from_ready_file(state_dir)
        if world is None:
            raise WorldError(f"no world is running in {state_dir}: start one with "
                             f"`crashlab world start --state {state_dir}`")
        return world

    @classmethod
    def _from_ready_file(cls, state_dir: Path) -> "World | None":
        try:
            info = json.loads((state_dir / READY_FILE).read_text())
            world = cls(state_dir, int(info["port"]), int(info["pid"]), token=info.get("token", ""))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return world if world.is_alive() else None

    def is_alive(self) -> bool:
        """True if this world's own server answers: the process answering ``/health`` on its port has its pid
        (a server another world started on that port since, say, is not this world)."""
        import httpx  # here, not at the top: the world's server imports this package and never needs it

        try:
            reply = self._client().get(f"{self.url}/health", timeout=2)
            return reply.status_code == 200 and reply.json().get("pid") == self.pid
        except (httpx.HTTPError, ValueError, AttributeError):
            return False

    def running(self) -> bool:
        """Whether the server this object started is still up (False for a world attached to, not started)."""
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server and its whole process group (SIGTERM, then SIGKILL after ``timeout``); every wait
        is bounded. Safe to call twice: the second call does nothing, so it can never signal a pid the system
        has since given to another process. A world started without a folder removes its scratch folder,
        ledgers included."""
        if self._stopped:
            return
        self._stopped = True
        process = self._process
        if owned := process is not None:
            if self._stdout is not None:
                self._stdout.close()
            if process.poll() is None:  # not reaped: its pid, which leads its group, is still its own
                signal_group(self.pid, signal.SIGTERM)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    kill_group(self.pid)
                    try:
                        process.wait(timeout)
                    except subprocess.TimeoutExpired:  # not even SIGKILL: unkillable (a hung disk), left there
                        pass
            self._process = None
        elif self.is_alive():  # started elsewhere: signal it only if its pid still answers on its port
            signal_group(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.is_alive():
                kill_groups([self.pid], {os.getpgrp()})
        if owned or self._ready_file_pid() == self.pid:  # another world's ready file is not ours to remove
            (self.state_dir / READY_FILE).unlink(missing_ok=True)
        if self._scratch:
            remove_scratch(self.state_dir)
        self._close_client()

    def _ready_file_pid(self) -> int | None:
        try:
            return int(json.loads((self.state_dir / READY_FILE).read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what agents and lessons need ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ledger_dir(self) -> Path:
        return self._ledger_dir or self.state_dir / LEDGERS

    @property
    def agent_dir(self) -> Path:
        """Where agents keep their own durable state."""
        return self.state_dir / AGENT_DIR

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for an agent process: the endpoints and its state directory. Nothing in it
        says whether the run will be crashed: the world decides that (see :meth:`arm_crash`)."""
        env = {k: v for k, v in os.environ.items() if k not in (ENV_PRIVATE_DIR, "CRASHLAB_WORLD_TOKEN")}
        env.update({ENV_MODEL_URL: self.url, ENV_SERVICES_URL: self.url, ENV_STATE_DIR: str(self.agent_dir),
                    "PYTHONUNBUFFERED": "1"})
        env.update(extra)
        return env

    # --- the admin API: only the holder of the token (the harness) can use it -----------------------
    def _client(self):
        """The HTTP client this object asks the world with, made once and kept. ``httpx.get()`` makes a new
        client each call, and a client loads the certificate store (about 20 ms of CPU, for a plain-http
        loopback server): the harness asks ``crash_reached()`` every 50 ms while a crashed run is on its way
        to its point, so a new client per question cost more CPU than the agents. One per process: a forked
        child never shares its parent's connections."""
        import httpx  # here, not at the top: the world's server imports this package and never needs it

        with self._http_lock:
            if self._http is None or self._http_pid != os.getpid():
                self._http, self._http_pid = httpx.Client(), os.getpid()
            return self._http

    def _close_client(self) -> None:
        with self._http_lock:
            client, self._http = self._http, None
        if client is not None and self._http_pid == os.getpid():
            client.close()

    def _admin(self, method: str, path: str, **kwargs):
        import httpx

        try:
            reply = self._client().request(method, f"{self.url}/_admin/{path}",
                                           headers={"X-Crashlab-Admin": self._token}, timeout=30, **kwargs)
        except httpx.HTTPError as exc:
            raise WorldError(f"the world at {self.url} did not answer ({type(exc).__name__})") from None
        if reply.status_code != 200:
            raise WorldError(f"the world refused {method} /_admin/{path}: {reply.status_code} {cut_at_word(reply.text, 200)}")
        return reply.json()

    def arm_crash(self, point: CrashPoint | str | None, order_id: str = ORDER_ID, run=None) -> None:
        """Tell the world to kill ``run`` (a :class:`crashlab.world.runscope.RunScope`) when one of its processes makes
        the request for ``point`` for ``order_id`` (see :mod:`crashlab.world.crashes`); ``point=None`` disarms."""
        if point is not None:
            point = CrashPoint.parse(point)  # a one-line ValueError for a point no run can reach
            checked_order_id("arm_crash", order_id)
            if run is None:
                raise ValueError("arm_crash needs the run (a crashlab.world.runscope.RunScope) that may reach the point")
        self._admin("POST", "crash", json={"point": point and str(point), "order_id": order_id,
                                           "run": run and run.as_json()})

    def crash_run_started(self, pid: int) -> None:
        """Name the armed run's first process, for a run that only its process tree marks."""
        self._admin("POST", "crash/started", json={"pid": pid})

    def crash_reached(self) -> dict | None:
        """What the world saw of the armed crash point: ``None`` if it was not reached."""
        return self._admin("GET", "crash")["reached"]

    def audit(self, order_id: str = ORDER_ID):
        """What the world saw for ``order_id``: effects, duplicates, model calls, repeats -- for a backlog id, every
        order's (a :class:`~crashlab.world.backlog_audit.BacklogAudit`). Asked of the running world through its admin
        API; read from the ledger files once it has stopped."""
        from crashlab.world.backlog_audit import audit_from_json, audit_of

        if self._token and not self._stopped:
            return audit_from_json(self._admin("GET", "audit", params={"order_id": order_id}))
        return audit_of(self.kept_ledgers("audit it"), order_id)

    def __repr__(self) -> str:
        return f"World(url={self.url!r}, state_dir={str(self.state_dir)!r})"


__all__ = ["World", "WorldError", "KEY_LEASE", "LedgerError", "ENV_MODEL_URL", "ENV_SERVICES_URL", "ENV_STATE_DIR", "ENV_PRIVATE_DIR"]
