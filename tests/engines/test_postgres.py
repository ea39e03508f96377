"""The throwaway PostgreSQL the lessons start: it must start wherever the course is cloned."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from crashlab.engines.postgres import postgres_available, throwaway_postgres


@pytest.fixture
def open_folder():
    """A folder every user can traverse, as a clone in a CI checkout is (pytest's own are 0700, and for
    those the server is started in the system's temporary folder instead)."""
    folder = Path(tempfile.mkdtemp(prefix="crashlab-pgtest-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_server_starts_in_a_folder_deeper_than_a_unix_socket_path_allows(open_folder):
    ok, why = postgres_available()
    if not ok:
        pytest.skip(f"no local PostgreSQL to start: {why}")
    import psycopg

    deep = open_folder / ("a-folder-name-long-enough-" * 3) / ("to-put-a-socket-past-107-bytes-" * 2)
    deep.mkdir(parents=True)
    for folder in (deep, *deep.parents):
        if folder == open_folder:
            break
        os.chmod(folder, 0o755)
    assert len(str(deep)) > 107
    with throwaway_postgres(deep) as url:
        assert url.startswith("postgresql://postgres@127.0.0.1:")
        assert list(deep.glob("crashlab-pg-*")), "the cluster is in the folder asked for"
        with psycopg.connect(url, connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert not list(deep.glob("crashlab-pg-*")), "the cluster's folder is removed at the end of the block"
