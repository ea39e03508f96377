"""A full disk is named as such, in one line, and nothing half-written is kept: the agent's log, the commands'
outputs, and the command line's last word on any other write. The world's ledgers: tests/world/test_world_disk_full.py."""

from __future__ import annotations

import errno
import importlib
import json
import sqlite3

import pytest

from full_disk import fill, tiny_disk
from crashlab.errors import DiskFull
from crashlab.eventlog import append_event
from crashlab.plumbing.diskfull import disk_full
from crashlab.plumbing.outputs import RESULTS, OutputError, write_output


def test_what_counts_as_a_full_disk():
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert disk_full(sqlite3.OperationalError("database or disk is full"))
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise RuntimeError("the ledger cannot be written") from exc
    except RuntimeError as wrapped:
        assert disk_full(wrapped)  # raised from one
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not disk_full(sqlite3.DatabaseError("file is not a database"))


def test_an_append_to_a_full_disk_says_so_and_leaves_the_log_as_it_was(tmp_path):
    with tiny_disk(tmp_path / "disk") as disk:
        log = disk / "order.jsonl"
        append_event(log, {"kind": "decision", "step": 1})
        before = log.read_bytes()
        fill(disk)
        with pytest.raises(DiskFull, match=r"cannot append to the log .*order.jsonl: the disk is full \("):
            append_event(log, {"kind": "decision", "step": 2, "content": "x" * 20_000})  # more than a block
        assert log.read_bytes() == before  # not a byte of the record that could not be written


def test_an_output_on_a_full_disk_is_a_one_line_error_and_the_old_file_stays(tmp_path):
    with tiny_disk(tmp_path / "disk") as disk:
        target = disk / "results.json"
        write_output(target, json.dumps({"score": 1, "max_score": 2, "tests": []}), RESULTS)
        before = target.read_bytes()
        fill(disk)
        with pytest.raises(OutputError, match=r"cannot write .*results.json: the disk is full \("):
            write_output(target, json.dumps({"score": 2, "max_score": 2, "tests": [], "x": "y" * 50_000}), RESULTS)
        assert target.read_bytes() == before
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "results.json"]  # no half-written temporary


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device", "/data/results.json"),
                                   sqlite3.OperationalError("database or disk is full")])
def test_a_command_that_meets_a_full_disk_says_so_in_one_line(error, monkeypatch, capsys, tmp_path):
    cli = importlib.import_module("crashlab.cli.main")  # the module, not the function crashlab.cli exports

    def crash_test(args):
        raise error
    monkeypatch.setattr(cli, "_crash_test", crash_test)  # wherever a command writes, this is what it meets
    agent = tmp_path / "agent.py"
    agent.write_text("")
    assert cli.main(["crash-test", str(agent)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot write") and "the disk is full (" in err, err
    if isinstance(error, OSError):
        assert err == "error: cannot write /data/results.json: the disk is full (No space left on device)\n"
