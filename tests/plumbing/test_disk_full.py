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


TINY_NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": None, "id": "big-output", "metadata": {},
                            "outputs": [], "source": "print('x' * 200_000)"}],
                 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                 "nbformat": 4, "nbformat_minor": 5}


def test_executing_a_notebook_on_a_full_disk_leaves_it_whole(tmp_path, capsys):
    """`crashlab execute` writes the executed notebook beside the master and renames it over it: a disk that fills
    up during the write leaves the master byte for byte as it was, and no temporary file."""
    from crashlab.cli import main

    with tiny_disk(tmp_path / "disk", size="128k") as disk:
        master = disk / "01_tiny.ipynb"
        master.write_text(json.dumps(TINY_NOTEBOOK, indent=1) + "\n")
        before = master.read_bytes()
        fill(disk)
        assert main(["execute", str(master)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the disk is full" in err and "is unchanged" in err, err
        assert master.read_bytes() == before
        assert sorted(p.name for p in disk.iterdir()) == ["01_tiny.ipynb", "filler"]


def test_building_the_course_on_a_full_disk_leaves_every_student_notebook_whole(tmp_path):
    """`crashlab build` writes each student notebook through a temporary file too: on a full disk the one it was
    writing is left as the last build wrote it."""
    import shutil

    from crashlab.course.notebooks import repo_root
    from crashlab.grading.build import build_course

    solutions = tmp_path / "solutions"
    solutions.mkdir()
    shutil.copy(repo_root() / "solutions" / "01_naive_event_log.ipynb", solutions)
    with tiny_disk(tmp_path / "course", size="512k") as course:
        assert [p.name for p in build_course(solutions, course).wrote] == ["01_naive_event_log.ipynb"]
        student = course / "01_naive_event_log.ipynb"
        before = student.read_bytes()
        master = nbformat_with_a_new_cell(solutions / "01_naive_event_log.ipynb")
        fill(course)
        with pytest.raises(OutputError, match="the disk is full"):
            build_course(solutions, course)
        assert student.read_bytes() == before and master.exists()
        assert sorted(p.name for p in course.iterdir()) == ["01_naive_event_log.ipynb", "filler"]


def nbformat_with_a_new_cell(path):
    """The master with one more markdown cell: a build must write its student notebook again."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("A note added to the master. " * 400))
    nbformat.write(nb, path)
    return path
