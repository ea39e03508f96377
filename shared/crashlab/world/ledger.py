"""The world's ledgers: one SQLite file per service, plus one for the model's calls.

The ledgers are the ground truth the harness judges by. They live in the world's state directory,
outside the agent process, so nothing an agent does in its own memory can hide a duplicate.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

# One ledger file per service, named for what it holds.
SERVICE_LEDGERS = {"payments": "payments.db", "inventory": "inventory.db", "email": "email.db"}
MODEL_LEDGER = "model.db"
CONTROL_LEDGER = "control.db"

_SERVICE_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL,
    kind            TEXT NOT NULL,
    order_id        TEXT NOT NULL,
    params          TEXT NOT NULL,
    idempotency_key TEXT,
    pid             INTEGER,
    at              REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key         TEXT PRIMARY KEY,
    params_hash TEXT NOT NULL,
    state       TEXT NOT NULL,          -- 'in_flight' or 'done'
    status      INTEGER,
    response    TEXT,
    at          REAL NOT NULL
);
"""

_MODEL_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id      TEXT,
    messages_hash TEXT NOT NULL,
    repeat_of     INTEGER,             -- seq of the earlier call with the same messages, if any
    request       TEXT NOT NULL,
    status        INTEGER NOT NULL,
    stop_reason   TEXT,
    reply         TEXT,
    pid           INTEGER,
    at            REAL NOT NULL
);
"""

_CONTROL_SCHEMA = """
CREATE TABLE IF NOT EXISTS faults (
    name      TEXT PRIMARY KEY,       -- e.g. 'lost_ack:charge_card' or 'model_reply:2'
    remaining INTEGER NOT NULL,
    arg       TEXT
);
"""


class LedgerError(RuntimeError):
    """A ledger file is missing, unreadable or corrupt. The message names the file."""


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open a ledger. Read-only opens never create a file, so a typo is an error, not an empty ledger."""
    try:
        if readonly:
            if not path.exists():
                raise LedgerError(f"ledger {path} does not exist: was the world started in this directory?")
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        else:
            conn = sqlite3.connect(path, timeout=10, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"ledger {path} is not a readable SQLite database ({exc})") from None
    conn.row_factory = sqlite3.Row
    return conn


def create_all(state_dir: Path) -> None:
    """Create every ledger (idempotently) in ``state_dir``."""
    state_dir.mkdir(parents=True, exist_ok=True)
    for name in SERVICE_LEDGERS.values():
        with_schema(state_dir / name, _SERVICE_SCHEMA)
    with_schema(state_dir / MODEL_LEDGER, _MODEL_SCHEMA)
    with_schema(state_dir / CONTROL_LEDGER, _CONTROL_SCHEMA)


def with_schema(path: Path, schema: str) -> None:
    conn = connect(path)
    try:
        conn.executescript(schema)
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"ledger {path} is not a readable SQLite database ({exc})") from None
    finally:
        conn.close()


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
