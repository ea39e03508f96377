"""The world under faults of its own: it deletes nothing it did not create, a key never sticks, and it
leaves no scratch folder behind.

Verdicts come from the world's ledgers and from real processes: the world's server is SIGKILLed inside
the window between claiming a key and committing its effect (held open by a latency fault), then
restarted on the same state.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from crashlab.order import AMOUNT, ORDER_ID
from crashlab.world import World, WorldError

CHARGES = "/payments/charges"
CHARGE = {"order_id": ORDER_ID, "amount": AMOUNT}
MARKER = ".crashlab-world"


def post(world: World, body=CHARGE, key: str | None = None) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return httpx.post(world.url + CHARGES, json=body, headers=headers, timeout=60)


def in_background(world: World, key: str) -> tuple[threading.Thread, dict]:
    """Send a charge with ``key`` from a thread; ``outcome['reply']`` is the response or the error."""
    outcome: dict = {}

    def call():
        try:
            outcome["reply"] = post(world, key=key)
        except httpx.HTTPError as exc:
            outcome["reply"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, outcome


def rows(state: Path, query: str) -> list[dict]:
    conn = sqlite3.connect(f"file:{state / 'ledgers' / 'payments.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(query)]
    finally:
        conn.close()


def key_row(state: Path, key: str) -> dict | None:
    found = rows(state, f"SELECT * FROM idempotency_keys WHERE key = '{key}'")
    return found[0] if found else None


def wait_for(condition, seconds: float = 10.0, what: str = "the condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def wait_past(moment: float) -> None:
    while time.time() <= moment:
        time.sleep(max(0.01, moment - time.time() + 0.01))


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message
    return message


# --- 1. nothing deleted that the world did not create ----------------------------------------------------

@pytest.mark.parametrize("fresh", [True, False])
def test_a_folder_the_world_did_not_make_is_refused_and_left_untouched(tmp_path, fresh):
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "01_naive_event_log.ipynb").write_text("{}")
    (course / "solutions" / "agent.py").write_text("print('mine')")
    with pytest.raises(WorldError) as excinfo:
        World.start(course, fresh=fresh)
    assert "not made by a world" in one_line_error(excinfo) and "new or empty folder" in str(excinfo.value)
    assert sorted(p.name for p in course.iterdir()) == ["01_naive_event_log.ipynb", "solutions"]
    assert (course / "solutions" / "agent.py").read_text() == "print('mine')"


def test_a_file_a_read_only_folder_or_a_path_through_a_file_is_refused_with_one_line(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me")
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        for state, words in [(afile, "is a file"), (read_only, "read-only"), (afile / "world", "cannot use")]:
            for fresh in (True, False):
                with pytest.raises(WorldError) as excinfo:
                    World.start(state, fresh=fresh)
                assert words in one_line_error(excinfo), (state, str(excinfo.value))
        assert afile.read_text() == "keep me"
        assert read_only.is_dir() and list(read_only.iterdir()) == []
    finally:
        read_only.chmod(0o755)


def test_the_cli_refuses_to_start_a_world_in_the_course_folder(tmp_path):
    (tmp_path / "01_naive_event_log.ipynb").write_text("{}")
    try:
        done = subprocess.run([sys.executable, "-m", "crashlab.cli", "world", "start", "--state", "."], cwd=tmp_path,
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("`crashlab world start --state .` started a world in a folder of the learner's")
    assert done.returncode != 0
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert (tmp_path / "01_naive_event_log.ipynb").read_text() == "{}"


def test_a_new_and_an_empty_folder_are_accepted_and_marked(tmp_path):
    """(A folder that only looks like a world's, with no marker, is refused: tests/cli/test_no_overwrite.py.)"""
    empty = tmp_path / "empty"
    empty.mkdir()
    for state in (tmp_path / "new" / "world", empty):
        with World.start(state) as world:
            post(world).raise_for_status()
            assert world.audit().counts["charge"] == 1
            (world.agent_dir / "events.jsonl").write_text("{}\n")
        assert (state / MARKER).is_file()
        with World.start(state) as world:
            assert world.audit().counts["charge"] == 0
        assert not (state / "agent" / "events.jsonl").exists()  # the agents' state went with the world's


def test_a_fresh_world_deletes_the_agents_state_but_not_a_learners_file_beside_it(tmp_path):
    """What agents keep in ``agent/`` goes with a fresh world; a file a learner saved there (an agent's source, notes)
    stays, at any depth, and nothing is followed through a link."""
    state = tmp_path / "w"
    outside = tmp_path / "outside.sqlite"
    outside.write_text("not the world's")
    with World.start(state) as world:
        agent = world.agent_dir
        (agent / "ORD-8842.jsonl").write_text("{}\n")
        (agent / "dbos.sqlite").write_text("")
        (agent / "dbos.sqlite-wal").write_text("")
        (agent / "deep" / "er").mkdir(parents=True)
        (agent / "deep" / "er" / "checkpoints.sqlite").write_text("")
        (agent / "notes").mkdir()
        (agent / "notes" / "what I saw.md").write_text("keep me")
        (agent / "my_agent.py").write_text("print('mine')\n")
        (agent / "link.sqlite").symlink_to(outside)
    with World.start(state) as world:
        left = sorted(str(p.relative_to(world.agent_dir)) for p in world.agent_dir.rglob("*"))
    assert left == ["my_agent.py", "notes", "notes/what I saw.md"], left
    assert outside.read_text() == "not the world's"


def test_keep_restarts_a_world_on_its_own_ledgers(tmp_path):
    """``fresh=False`` (``crashlab world start --keep``): the ledgers survive a stop and a start."""
    state = tmp_path / "w"
    with World.start(state) as world:
        first = post(world, key="k-kept")
        first.raise_for_status()
        (world.agent_dir / "events.jsonl").write_text("{}\n")
    (state / "learner-notes.txt").write_text("inside the world's folder, but not the world's")
    with World.start(state, fresh=False) as world:
        assert world.audit().counts["charge"] == 1
        replay = post(world, key="k-kept")
        assert replay.headers.get("Idempotent-Replayed") == "true" and replay.json() == first.json()
        post(world, key="k-new").raise_for_status()
        assert world.audit().counts["charge"] == 2
        assert (world.agent_dir / "events.jsonl").exists()
    with World.start(state) as world:  # fresh again: the world empties its own folder
        assert world.audit().counts["charge"] == 0
        assert not (world.agent_dir / "events.jsonl").exists()
    assert (state / "learner-notes.txt").exists()  # the world deletes only its own files, by name


def test_keep_on_a_damaged_ledger_says_which_in_one_line(tmp_path):
    """A ledger damaged between a stop and ``--keep`` is named in one line, not the server's traceback; the
    log's earlier runs are not quoted as this start's reason, and the damaged file is left as it was."""
    state = tmp_path / "w"
    with World.start(state):
        pass
    (state / "world.log").write_text("Traceback (most recent call last):\nOldError: an earlier run's words\n")
    damaged = state / "ledgers" / "payments.db"
    damaged.write_bytes(b"not a database")
    with pytest.raises(WorldError) as caught:
        World.start(state, fresh=False)
    message = str(caught.value)
    assert "\n" not in message and "payments.db is not a readable SQLite database" in message, message
    assert "OldError" not in message and "Traceback" not in message, message
    assert damaged.read_bytes() == b"not a database"


# --- 2. no stuck key -----------------------------------------------------------------------------------

def test_a_key_left_in_flight_by_a_killed_world_is_retryable_after_its_lease(tmp_path):
    """The world is SIGKILLed while a keyed charge sits between its claim and its effect (a latency
    fault holds it there). Restarted on the same state, the key is taken over once the dead request's
    lease has run out; a second request while the new one is really in flight gets 409; one effect."""
    state, key = tmp_path / "w", "k-crash"
    world = World.start(state, key_lease=1.0)
    try:
        world.inject("latency:charge_card", arg="30")
        doomed, outcome = in_background(world, key)
        claim = wait_for(lambda: key_row(state, key), what="the key's claim in the ledger")
        os.kill(world.pid, signal.SIGKILL)
        world._process.wait(10)
    finally:
        world.stop()
    doomed.join(10)
    assert isinstance(outcome["reply"], httpx.HTTPError)  # the client never got an answer
    assert claim["state"] == "in_flight" and key_row(state, key)["state"] == "in_flight"
    assert rows(state, "SELECT * FROM effects") == []  # killed inside the window: no effect

    with World.start(state, fresh=False) as again:  # the default lease (5 s) for the requests from now on
        wait_past(claim["lease_until"])
        again.inject("latency:charge_card", arg="1.5")
        retry, retried = in_background(again, key)
        wait_for(lambda: "reply" in retried or key_row(state, key)["owner"] != claim["owner"],
                 what="the retry to take the key over")
        assert "reply" not in retried, f"the retry could not take the key over: {retried['reply'].text}"
        meanwhile = post(again, key=key)  # the retry is really in flight now
        retry.join(30)
        later = post(again, key=key)
        effects = again.audit().effects["charge"]
    assert meanwhile.status_code == 409, meanwhile.text
    assert meanwhile.json()["error"]["type"] == "idempotency_key_in_use"
    assert retried["reply"].status_code == 200, retried["reply"]
    assert "Idempotent-Replayed" not in retried["reply"].headers
    assert later.headers.get("Idempotent-Replayed") == "true" and later.json() == retried["reply"].json()
    assert [(e["id"], e["idempotency_key"]) for e in effects] == [(retried["reply"].json()["id"], key)]


def test_a_request_that_outlives_its_lease_makes_no_second_effect(tmp_path):
    """A request slower than its lease loses its key to a retry; when it wakes, it commits nothing and
    answers with the retry's result: the effect and the key's completion commit together, or not at all."""
    state, key = tmp_path / "w", "k-slow"
    with World.start(state, key_lease=0.5) as world:
        world.inject("latency:charge_card", arg="2.0")
        slow, outcome = in_background(world, key)
        claim = wait_for(lambda: key_row(state, key), what="the key's claim in the ledger")
        wait_past(claim["lease_until"])
        retry = post(world, key=key)  # takes the lapsed key over; the latency fault fired once only
        slow.join(30)
        effects = world.audit().effects["charge"]
    assert retry.status_code == 200 and "Idempotent-Replayed" not in retry.headers, retry.text
    slow_reply = outcome["reply"]
    assert slow_reply.status_code == 200 and slow_reply.headers.get("Idempotent-Replayed") == "true"
    assert slow_reply.json() == retry.json()
    assert [e["id"] for e in effects] == [retry.json()["id"]]


def test_keep_on_ledgers_from_before_the_lease(tmp_path):
    """Ledgers written before keys had a lease get its columns; a key they left in flight is retryable."""
    state = tmp_path / "w"
    (state / "ledgers").mkdir(parents=True)
    (state / "world.log").write_text("")
    (state / MARKER).write_text("")  # a world's folder: only its marker makes it one
    conn = sqlite3.connect(state / "ledgers" / "payments.db")
    conn.executescript("""
        CREATE TABLE effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, kind TEXT NOT NULL,
            order_id TEXT NOT NULL, params TEXT NOT NULL, idempotency_key TEXT, pid INTEGER, at REAL NOT NULL);
        CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY, params_hash TEXT NOT NULL, state TEXT NOT NULL,
            status INTEGER, response TEXT, at REAL NOT NULL);
    """)
    with World.start(tmp_path / "probe") as probe:  # the hash the world gives this charge
        post(probe, key="k-probe").raise_for_status()
        params_hash = rows(probe.state_dir, "SELECT params_hash FROM idempotency_keys")[0]["params_hash"]
    conn.execute("INSERT INTO idempotency_keys VALUES ('k-stuck', ?, 'in_flight', NULL, NULL, 0)", (params_hash,))
    conn.commit()
    conn.close()
    with World.start(state, fresh=False) as world:
        reply = post(world, key="k-stuck")
        assert reply.status_code == 200, reply.text
        assert [e["idempotency_key"] for e in world.audit().effects["charge"]] == ["k-stuck"]


# --- 3. no scratch folder left behind ------------------------------------------------------------------

def test_a_world_without_a_folder_leaves_no_scratch_folder():
    world = World.start()
    try:
        scratch = world.state_dir
        assert scratch.is_relative_to(Path(tempfile.gettempdir()).resolve())
        post(world).raise_for_status()
        assert world.audit().counts["charge"] == 1
    finally:
        world.stop()
    assert not scratch.exists()
    with pytest.raises(WorldError, match="scratch folder"):
        world.audit()
