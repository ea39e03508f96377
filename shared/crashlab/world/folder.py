"""The world's state folder: which folder a world may take, and what a fresh world may delete in it.

A world is often started in a folder the learner also uses (``--state .``, a lesson's folder), so it deletes
only what it made, by name, and takes a folder for its own only when the folder carries its marker: a folder
that merely looks like a world's (a ``world.log``, a ``ledgers/``) may hold the learner's files.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from crashlab.world.errors import WorldError
from crashlab.world.ledger import LEDGER_FILES

READY_FILE = "world.json"
LOG_FILE = "world.log"
LEDGERS = "ledgers"
# The agents' durable state (event logs, checkpoints): handed to the agents a world runs, so it goes with the
# world's state, as a fresh world must start with none. Agents write logs, databases, locks and small JSON records
# there; a file of a kind a person writes (an agent's source, a notebook, notes) is the learner's, and stays.
AGENT_DIR = "agent"
PERSONS_FILES = (".py", ".ipynb", ".md", ".txt", ".rst", ".csv", ".tsv", ".pdf", ".png", ".jpg", ".jpeg", ".svg",
                 ".html", ".docx", ".xlsx", ".odt", ".tex", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".sh")
# Written by the world into a state folder it takes, so it only ever empties a folder it made its own.
MARKER = ".crashlab-world"
# The files a world writes at the top of its folder, and those its server writes in ledgers/ (SQLite adds
# the journal files beside each ledger).
OWN_FILES = (READY_FILE, "world.tmp", LOG_FILE)  # world.tmp: the server's ready file while it is written
OWN_LEDGER_FILES = tuple(f"{name}{suffix}" for name in LEDGER_FILES for suffix in ("", "-wal", "-shm", "-journal"))


def take_folder(state_dir: Path) -> None:
    """Make ``state_dir`` the world's, deleting nothing: create it if need be and write the marker, or
    refuse (one line, saying what to do) a file, a read-only folder or a non-empty folder without the marker."""
    try:
        if state_dir.exists() and not state_dir.is_dir():
            raise WorldError(f"{state_dir} is a file: name a new or empty folder for the world's state")
        state_dir.mkdir(parents=True, exist_ok=True)
        entries = {entry.name for entry in os.scandir(state_dir)}
        if entries and not is_marked(state_dir):
            raise WorldError(f"{state_dir} is not empty and was not made by a world (it has no {MARKER}), and a "
                              f"world never deletes what it did not create: name a new or empty folder for its "
                              f"state, such as .crashlab/world (an old world's folder: delete it yourself)")
        # Root may write anywhere: a folder with no write bit at all is read-only on purpose, for root too.
        if not os.access(state_dir, os.W_OK) or not state_dir.stat().st_mode & 0o222:
            raise WorldError(f"{state_dir} is read-only: name a folder the world can write to")
        fd = os.open(state_dir / MARKER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as marker:
            marker.write("This folder belongs to a crashlab world. Starting afresh, it deletes its own files here "
                         f"({', '.join(OWN_FILES)}, its ledgers in {LEDGERS}/ and the agents' state in "
                         f"{AGENT_DIR}/, but not a file of yours there: {' '.join(PERSONS_FILES)}) and nothing "
                         "else.\n")
    except OSError as exc:
        raise WorldError(f"cannot use {state_dir} for the world's state ({exc.strerror or exc}): "
                          f"name a new or empty folder the world can write to") from None


def is_marked(state_dir: Path) -> bool:
    """Whether ``state_dir`` carries the world's marker, a plain file (a planted symlink does not count)."""
    try:
        return stat.S_ISREG(os.lstat(state_dir / MARKER).st_mode)
    except OSError:
        return False


def empty_world_folder(state_dir: Path) -> None:
    """Delete the world's own files in its folder, by name, and nothing else: its ready file and log, its
    ledgers (a ``ledgers/`` holding anything else keeps that), and the agents' state (a file of the learner's in
    ``agent/`` stays: :func:`empty_agent_state`). Symlinks are removed, never followed."""
    try:
        for name in OWN_FILES:
            _remove(state_dir / name)
        empty_agent_state(state_dir / AGENT_DIR)
        ledgers = state_dir / LEDGERS
        if ledgers.is_dir() and not ledgers.is_symlink():
            for name in OWN_LEDGER_FILES:
                _remove(ledgers / name)
            if not any(ledgers.iterdir()):
                ledgers.rmdir()
        elif ledgers.is_symlink():
            ledgers.unlink()  # the world never writes its ledgers through a link
        elif ledgers.exists():
            raise WorldError(f"{ledgers} is a file, not the world's ledgers: move it, or start the world in a "
                              f"new folder")
    except OSError as exc:
        raise WorldError(f"cannot empty the world's folder {state_dir} ({exc.strerror or exc}): "
                          f"remove it, or start the world in a new folder") from None


def empty_agent_state(agent_dir: Path) -> None:
    """Delete what agents keep in ``agent_dir`` -- event logs, databases, locks, records -- at every depth, and
    the folders it leaves empty; a file (or link) of a kind a person writes (:data:`PERSONS_FILES`: an agent's
    source, a notebook, notes), and the folders on its way, stay."""
    if agent_dir.is_symlink() or (agent_dir.exists() and not agent_dir.is_dir()):
        agent_dir.unlink()  # never followed: the agents' state is a folder of the world's
        return
    if not agent_dir.is_dir():
        return
    for folder, dirs, files in os.walk(agent_dir, topdown=False):
        here = Path(folder)
        for name in files + [d for d in dirs if (here / d).is_symlink()]:  # os.walk lists a link to a folder as one
            if not name.lower().endswith(PERSONS_FILES):
                (here / name).unlink()
        if here != agent_dir and not any(here.iterdir()):
            here.rmdir()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()
