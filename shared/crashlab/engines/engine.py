"""What the course knows about one durable-execution engine, as a type: :class:`Engine`, every fact the rest of the
course reads about it -- names, packages and pins, what its processes import, the variables its agents read, its
server (:class:`Server`), its benchmark rows (:class:`~crashlab.engines.workload.Workloads`), what it records and
how to read that record (:class:`~crashlab.engines.record.RecordReader`), and the agent frameworks' durable
integrations that run on it (:class:`Integration`). Each engine's folder defines its entry (``ENGINE`` in its
``__init__``); :mod:`crashlab.engines.registry` lists them.

An entry is cheap to import: what needs the engine's SDK, its server or its database is imported when it is used.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Callable, Iterator

from crashlab.engines.record import RecordReader
from crashlab.engines.workload import Workloads
from crashlab.errors import ServerError


@dataclass(frozen=True)
class Server:
    """An engine's own server, which the course starts for the agents that need it (``needs`` in a lesson's
    metadata, ``--needs`` on the command line).

    ``serve(folder, timeout)``: a fresh server in ``folder`` for a block, yielding what agent processes need to find
    it (its variables, among the engine's ``env``). ``binary_env``: the variable that names its binary (a lesson's
    kernel may start a server, so a student's process may see it). ``error``: what starting it raises.
    ``version()``: the version of the binary found here, where it is not a Python package (None if it cannot tell).
    ``pin``: the version the course installs, where it is not a Python package (read from the engine's
    ``SERVER_VERSION`` file, which the Makefiles and installers read too)."""

    serve: Callable[[Path, float], AbstractContextManager[dict[str, str]]]
    binary_env: str
    error: type[ServerError]
    version: Callable[[], str | None] = lambda: None
    pin: str = ""


@dataclass(frozen=True)
class Integration:
    """An agent framework's durable integration on an engine (Pydantic AI's on Temporal, say): its benchmark row
    runs the engine's trivial steps the framework's way, on the engine's server, beside the engine's own row."""

    variant: str                       # its benchmark row, "<engine>+<framework>" or "<engine>-<api>"
    title: str                         # as prose and tables name it
    beside: str                        # the engine's own benchmark row it is compared with, in the same run
    packages: tuple[str, ...]          # the framework's distributions, whose versions a benchmark prints
    imports: tuple[str, ...]           # what its processes import besides the engine's own (preloaded)
    workload: Workloads                # how its benchmark row runs


@dataclass(frozen=True)
class Engine:
    name: str                          # as a lesson's metadata and the CLI's --needs name it
    title: str                         # as prose and tables name it
    colour: str                        # its bars and marks in every picture
    packages: tuple[str, ...]          # the distributions whose installed versions a benchmark prints
    imports: tuple[str, ...]           # what its processes import before they work (preloaded, so a crash is cheap)
    env: tuple[str, ...]               # the variables its agents read (a server's address, a database's URL)
    bench: tuple[str, ...]             # its benchmark variants: rows of the benchmark's table
    workload: Workloads                # how those rows run
    records: str                       # what it records of an order, in a sentence
    record: RecordReader               # reads that record from its store
    server: Server | None = None       # its own server, if it has one (None: it runs inside the agent's process)
    integrations: tuple[Integration, ...] = ()  # frameworks' durable integrations on it: benchmark rows of their own
    long_bench: str = ""               # the row (one of ``bench``) that runs its long agent on the length axis

    @contextlib.contextmanager
    def serve(self, folder: Path, timeout: float = 30.0) -> Iterator[dict[str, str]]:
        """Its server, fresh, in ``folder``, for the block; yields what agent processes need to find it."""
        if self.server is None:
            raise ValueError(f"{self.title} runs inside the agent's own process: it has no server to start")
        with self.server.serve(Path(folder), timeout) as env:
            yield env

    @property
    def student_env(self) -> tuple[str, ...]:
        """What a student's process may see of this engine: its agents' variables and its server's binary."""
        return (*self.env, *((self.server.binary_env,) if self.server else ()))

    def versions(self) -> dict[str, str]:
        """The installed versions of its packages (its integrations' too), and of its server's binary
        (``<name>-server``) where that is not a Python package; what is not installed is left out."""
        found = {}
        for dist in (*self.packages, *(p for i in self.integrations for p in i.packages)):
            with contextlib.suppress(PackageNotFoundError):
                found[dist] = version(dist)
        if self.server is not None:
            with contextlib.suppress(Exception):  # a binary that is missing or answers oddly: no figure
                binary = self.server.version()
                if binary:
                    found[f"{self.name}-server"] = binary
        return found


__all__ = ["Engine", "Integration", "Server"]
