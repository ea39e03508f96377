"""The world's ledgers: one SQLite file per service, plus one for the model's calls.

The ledgers are the ground truth the harness judges by. They live in the world's state directory,
outside the agent process, so nothing an agent does in its own memory can hide a duplicate.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
import zlib
from pathlib import Path

from crashlab.errors import CrashlabError
from crashlab.plumbing.diskfull import disk_full, full_disk_message

# One ledger file per service, named for what it holds.
SERVICE_LEDGERS = {"payments": "payments.db", "inventory": "inventory.db", "email": "email.db"}
MODEL_LEDGER = "model.db"
CONTROL_LEDGER = "control.db"
SCREEN_LEDGER = "screen.db"  # the user's screen: what it was asked to show, and each streamed reply's delivery
# Every file the world keeps its ledgers in: a fresh world deletes these, by name, and nothing else.
LEDGER_FILES = (*SERVICE_LEDGERS.values(), MODEL_LEDGER, CONTROL_LEDGER, SCREEN_LEDGER)

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
    at          REAL NOT NULL,
    owner       TEXT,                   -- the request holding the key while it is in flight
    lease_until REAL                    -- after this, a request with the key may take it over
);
"""
# Columns added to a table after its first release; a world restarted on older ledgers adds them.
_ADDED_COLUMNS = {"idempotency_keys": {"owner": "TEXT", "lease_until": "REAL"},
                  "calls": {"summary": "INTEGER NOT NULL DEFAULT 0"}}

_MODEL_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id      TEXT,
    messages_hash TEXT NOT NULL,
    repeat_of     INTEGER,             -- seq of the earlier call with the same messages, if any
    request       TEXT NOT NULL,       -- the messages' canonical JSON; a long one zlib-compressed (packed_request)
    status        INTEGER NOT NULL,
    stop_reason   TEXT,
    reply         TEXT,
    pid           INTEGER,
    at            REAL NOT NULL,
    summary       INTEGER NOT NULL DEFAULT 0  -- 1: a backlog's summary call, never its final answer
);
"""

_CONTROL_SCHEMA = """
CREATE TABLE IF NOT EXISTS faults (
    name      TEXT PRIMARY KEY,       -- e.g. 'lost_ack:charge_card' or 'model_reply:2'
    remaining INTEGER NOT NULL,
    arg       TEXT
);
CREATE TABLE IF NOT EXISTS flaky (     -- a time-bounded fault: every request fails until 'until'
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    until        REAL NOT NULL,        -- wall-clock time, so a world restarted meanwhile stays flaky
    status       INTEGER NOT NULL,     -- what the services answer
    model_status INTEGER,              -- what the model answers (NULL: the model is left alone)
    refused      INTEGER NOT NULL DEFAULT 0  -- requests answered with an error so far
);
CREATE TABLE IF NOT EXISTS failures (  -- permanent failures: every call of this tool for this order fails
    order_id TEXT NOT NULL,
    tool     TEXT NOT NULL,
    reason   TEXT NOT NULL,            -- the error's type, e.g. 'out_of_stock'
    PRIMARY KEY (order_id, tool)
);
"""

# The screen is dumb on purpose: it records every request to show text, in arrival order, with whatever identity
# the sender claims, and never deduplicates, so that every mistake is in its ledger (crashlab.world.screen_audit
# judges it). ``deliveries``: every streamed model reply as the world sent it, for the crash point inside a stream.
_SCREEN_SCHEMA = """
CREATE TABLE IF NOT EXISTS shown (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT NOT NULL,
    kind     TEXT NOT NULL,          -- 'show' or 'retract'
    text     TEXT,                   -- what appeared on the user's screen ('show')
    turn     INTEGER,                -- the identity the sender claims, all optional: the conversation's turn,
    chunk    INTEGER,                --   the text delta's index in that turn's reply (from 0),
    attempt  TEXT,                   --   the model reply (message id) the text came from,
    stream   TEXT,                   --   or a durable stream's name and the value's offset in it
    offset   INTEGER,
    pid      INTEGER,
    at       REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries (
    message_id TEXT PRIMARY KEY,     -- the streamed reply (the model ledger's reply id: the attempt)
    order_id   TEXT,
    chunks     TEXT NOT NULL,        -- JSON list of its text deltas, in order
    deltas     INTEGER NOT NULL,     -- content_block_delta events in it (text and tool-input JSON)
    sent       INTEGER NOT NULL DEFAULT 0,  -- deltas flushed to the client
    complete   INTEGER NOT NULL DEFAULT 0,  -- message_stop flushed
    cut        TEXT,                 -- why it ended early: the crash point, or 'client gone'
    at         REAL NOT NULL
);
"""


class LedgerError(CrashlabError, RuntimeError):
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
        raise _unreadable(path, exc) from (exc if disk_full(exc, path) else None)
    conn.row_factory = sqlite3.Row
    return conn


def _unreadable(path: Path, exc: sqlite3.DatabaseError) -> LedgerError:
    """A ledger that could not be opened or set up: a full disk says so (raised from it, so that the world's answer
    can say so too), anything else is a ledger that is not readable."""
    if disk_full(exc, path):
        return LedgerError(full_disk_message(f"ledger {path} cannot be written", exc))
    return LedgerError(f"ledger {path} is not a readable SQLite database ({exc})")


def create_all(state_dir: Path) -> None:
    """Create every ledger (idempotently) in ``state_dir``."""
    state_dir.mkdir(parents=True, exist_ok=True)
    for name in SERVICE_LEDGERS.values():
        with_schema(state_dir / name, _SERVICE_SCHEMA)
    with_schema(state_dir / MODEL_LEDGER, _MODEL_SCHEMA)
    with_schema(state_dir / CONTROL_LEDGER, _CONTROL_SCHEMA)
    with_schema(state_dir / SCREEN_LEDGER, _SCREEN_SCHEMA)


def with_schema(path: Path, schema: str) -> None:
    conn = connect(path)
    try:
        conn.executescript(schema)
        for table, columns in _ADDED_COLUMNS.items():
            have = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns.items():
                if have and name not in have:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    except sqlite3.DatabaseError as exc:
        raise _unreadable(path, exc) from (exc if disk_full(exc, path) else None)
    finally:
        conn.close()


# --- the idempotency store ---------------------------------------------------------------------------
# Stripe's semantics, crash-consistent. A request claims its key for a lease, in its own transaction, so
# that a second request with the key sees it in flight (409). The effect and the key's completion then
# commit together, and only while the claim is still this request's. A claim is the only thing that can
# outlive a crash of the world; once its lease has run out, the next request with the key takes it over.
# A request slower than its lease may lose its key the same way: it then commits nothing and answers
# with what the key holds, so a key never has two effects.
# A key has a lifetime too (none by default), as at payment providers, which forget a key after about a day:
# a completed key first used longer ago than that is forgotten, and a request with it is a new effect.

def claim_key(conn: sqlite3.Connection, key: str, params_hash: str, lease: float,
              lifetime: float | None = None) -> str | sqlite3.Row:
    """Claim ``key`` for this request: its owner token, or (key in flight, done, or used with other
    parameters) the key's row to answer from. A done key older than ``lifetime`` seconds is forgotten."""
    now = time.time()
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT * FROM idempotency_keys WHERE key = ?", (key,)).fetchone()
        lapsed = (row is not None and row["state"] == "in_flight" and row["params_hash"] == params_hash
                  and (row["lease_until"] or 0) <= now)
        forgotten = (row is not None and row["state"] == "done" and lifetime is not None
                     and row["at"] + lifetime <= now)
        if row is not None and not (lapsed or forgotten):
            conn.execute("COMMIT")
            return row
        owner = secrets.token_hex(8)
        if forgotten:  # as if never seen: its first use, its parameters and its answer are gone
            conn.execute("DELETE FROM idempotency_keys WHERE key = ?", (key,))
        conn.execute("INSERT INTO idempotency_keys(key, params_hash, state, owner, lease_until, at)"
                     " VALUES (?, ?, 'in_flight', ?, ?, ?) ON CONFLICT(key) DO UPDATE"
                     " SET owner = excluded.owner, lease_until = excluded.lease_until",
                     (key, params_hash, owner, now + lease, now))
        conn.execute("COMMIT")
        return owner
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def record_effect(conn: sqlite3.Connection, effect: dict | None, response: str, owner: str | None, *,
                  key: str | None = None, status: int = 200) -> sqlite3.Row | None:
    """Insert ``effect`` and, with a key, complete the key with ``status`` and ``response``: one transaction.
    If the key is no longer ``owner``'s, nothing is written and the key's row is returned to answer from.
    ``effect=None`` (a call that failed for good, ``key`` given) completes the key with its error alone."""
    key = effect["idempotency_key"] if effect is not None else key
    conn.execute("BEGIN IMMEDIATE")
    try:
        if key is not None:
            row = conn.execute("SELECT * FROM idempotency_keys WHERE key = ?", (key,)).fetchone()
            if row["owner"] != owner or row["state"] != "in_flight":
                conn.execute("ROLLBACK")
                return row
            conn.execute("UPDATE idempotency_keys SET state = 'done', status = ?, response = ?, lease_until = NULL"
                         " WHERE key = ?", (status, response, key))
        if effect is not None:
            conn.execute(f"INSERT INTO effects({', '.join(effect)}) VALUES ({', '.join('?' * len(effect))})",
                         tuple(effect.values()))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return None


PACK_ABOVE = 32 * 1024  # characters: a longer request is kept zlib-compressed (see packed_request)


def packed_request(request_json: str) -> str | bytes:
    """A model call's request as the model ledger keeps it: its canonical JSON text, as always, up to
    :data:`PACK_ABOVE` characters (every lesson order's request is far shorter, and lesson 8 reads one back);
    zlib-compressed bytes above. A long agent sends its whole conversation every turn, so the requests of N turns weigh
    O(N^2) bytes: compressed, a conversation whose tool results repeat themselves (a backlog's receipts) costs a small
    fraction of that, and the audit never reads the requests at all (only the hash, the status and the stop reason).
    :func:`request_text` reads either form back."""
    return request_json if len(request_json) <= PACK_ABOVE else zlib.compress(request_json.encode(), 6)


def request_text(stored: str | bytes) -> str:
    """The JSON text of a request the model ledger kept (:func:`packed_request`), whichever form it was kept in."""
    return stored if isinstance(stored, str) else zlib.decompress(stored).decode()


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
