"""A throwaway local PostgreSQL for the lessons and tests that offer Postgres as an option.

SQLite stays the default everywhere; Postgres is used only when a URL is given. Where the machine has
PostgreSQL installed (``initdb``, ``pg_ctl``, ``postgres`` on PATH or in ``/usr/lib/postgresql/*/bin``),
:func:`throwaway_postgres` makes a fresh cluster, serves it on ``127.0.0.1`` on a free port, and
stops and deletes it when the block ends::

    ok, why = postgres_available()
    if ok:
        with throwaway_postgres(tmp_dir) as url:   # postgresql://postgres@127.0.0.1:PORT/postgres
            ...

PostgreSQL refuses to run as root. When this process is root, the cluster is created and run as the
``postgres`` system user (through ``runuser``, or ``su`` where there is no ``runuser``), in a directory
that user can reach. The server trusts local connections (it listens on loopback only) and runs
with ``fsync=off``: it is for tests, and the crashes the course injects kill agents, not the machine.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

from crashlab.errors import ServerError
from crashlab.plumbing.scratch import make_scratch, remove_scratch

ENV_POSTGRES_URL = "CRASHLAB_POSTGRES_URL"
SERVICE_USER = "postgres"
_TOOLS = ("initdb", "pg_ctl", "postgres")


class PostgresError(ServerError):
    """The throwaway server could not be created or started. The message says why."""


def _bin_dir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres (the newest installed version wins)."""
    found = shutil.which("initdb")
    if found:
        folder = Path(os.path.realpath(found)).parent
        if all((folder / tool).exists() for tool in _TOOLS):
            return folder
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parent.name.split(".")])
    for candidate in reversed(candidates):
        folder = Path(candidate)
        if all((folder / tool).exists() for tool in _TOOLS):
            return folder
    return None


def _as_user_prefix() -> tuple[list[str] | None, str | None, str]:
    """How to run a PostgreSQL binary here: (command prefix, user to own the files, reason if impossible)."""
    if os.geteuid() != 0:
        return [], None, ""
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        return None, None, (f"running as root, and PostgreSQL refuses root; there is no {SERVICE_USER!r} "
                            "system user to run it as")
    if shutil.which("runuser"):
        return ["runuser", "-u", SERVICE_USER, "--"], SERVICE_USER, ""
    if shutil.which("su"):
        return ["su", SERVICE_USER, "-s", "/bin/sh", "-c"], SERVICE_USER, ""
    return None, None, "running as root, and neither runuser nor su is available to drop to a non-root user"


def postgres_available() -> tuple[bool, str]:
    """Whether :func:`throwaway_postgres` can work on this machine, and a sentence saying why (not)."""
    folder = _bin_dir()
    if folder is None:
        return False, ("PostgreSQL is not installed: no initdb/pg_ctl/postgres on PATH or in "
                       "/usr/lib/postgresql/*/bin (install the postgresql package to run the Postgres variants)")
    prefix, user, why = _as_user_prefix()
    if prefix is None:
        return False, why
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False, "the psycopg package is not installed, so Python cannot talk to PostgreSQL"
    return True, f"PostgreSQL from {folder}" + (f", run as the {user!r} user" if user else "")


def _run(prefix: list[str], argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    if prefix[:1] == ["su"]:
        command = prefix + [shlex.join(argv)]
    else:
        command = prefix + argv
    return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def _reachable_by_others(path: Path) -> bool:
    """Every directory from / down to ``path`` can be traversed by a user who is not its owner."""
    for folder in [path, *path.parents]:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_accepting(url: str, timeout: float) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise PostgresError(f"the throwaway PostgreSQL does not accept connections: {exc}") from None
            time.sleep(0.1)


@contextmanager
def throwaway_postgres(base_dir: str | os.PathLike) -> Iterator[str]:
    """A fresh PostgreSQL cluster on 127.0.0.1 for the length of the block; yields its URL.

    The cluster lives in a new directory under ``base_dir`` (or, when running as root and the
    ``postgres`` user cannot reach ``base_dir``, under the system temporary directory). At exit the
    server is stopped and the directory deleted.
    """
    ok, why = postgres_available()
    if not ok:
        raise PostgresError(why)
    folder, (prefix, user, _) = _bin_dir(), _as_user_prefix()
    if folder is None or prefix is None:  # postgres_available() said yes: neither happens
        raise PostgresError(why)
    base_dir = Path(base_dir).resolve()
    base_dir.mkdir(parents=True, exist_ok=True)
    if user and not _reachable_by_others(base_dir):
        root = make_scratch("crashlab-pg-")
    else:
        root = make_scratch("crashlab-pg-", dir=base_dir)
    data = root / "data"
    log = root / "server.log"
    started = False
    try:
        if user:
            os.chmod(root, 0o755)
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        init = _run(prefix, [str(folder / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                             "-E", "UTF8", "--no-sync", "--no-instructions"])
        if init.returncode != 0:
            raise PostgresError(f"initdb failed (exit {init.returncode}):\n{init.stdout[-1500:]}")
        for _attempt in range(5):
            port = _free_port()
            # TCP on the loopback only: a Unix socket's path is limited to 107 bytes, and a clone deep in
            # the file system (a CI checkout, a learner's home) would put the socket past it.
            options = (f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='' "
                       "-c fsync=off -c full_page_writes=off")
            start = _run(prefix, [str(folder / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "30",
                                  "-o", options, "start"])
            if start.returncode == 0:
                started = True
                break
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else start.stdout[-1500:]
            if "could not bind" not in tail and "Address already in use" not in tail:
                raise PostgresError(f"pg_ctl start failed (exit {start.returncode}):\n{tail}")
        if not started:
            raise PostgresError("could not find a free loopback port for PostgreSQL after 5 tries")
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        _wait_until_accepting(url, timeout=15)
        yield url
    finally:
        if started:
            _run(prefix, [str(folder / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], timeout=30)
        remove_scratch(root)





def fresh_database(url: str, prefix: str = "crashlab") -> str:
    """Create a new, empty database on the server at ``url`` and return its URL (same server and user).

    Agents that key their state on the order id need a clean database per run, just as each crash row
    gets a clean world."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


__all__ = ["postgres_available", "throwaway_postgres", "fresh_database", "PostgresError", "ENV_POSTGRES_URL"]
