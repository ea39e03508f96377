"""A lesson cell that waits says so (crashlab.lessons.heartbeat), in a real kernel, with the interval cut to half a
second; and the masters' output comparison drops those lines, however many a run wrote. How many lines a wait gets
depends on how the machine schedules the kernel's threads: the test asks for at least one, never an exact count."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from crashlab.course.notebooks import QUIET_KERNEL

SANITIZE = Path(__file__).resolve().parents[1] / "nbval-sanitize.cfg"


def test_a_waiting_cell_says_where_it_waits_and_only_where_it_writes_text(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASHLAB_HEARTBEAT_S", "0.5")
    cells = ["import time\nimport crashlab.lessons.notebook\n\n\ndef pause():\n    time.sleep(1.5)",
             "# Exercise 1: visible checks\npause()",  # a check: it writes text anyway; the line is the cell's own
             "print('waiting')\ntime.sleep(1.5)",  # a cell that has printed already
             "time.sleep(1.5)",  # no text of its own: its outputs keep their shape
             "print('resuming ... ', end='')\ntime.sleep(1.5)\nprint('done')",  # its own open line says it
             "# NBVAL_IGNORE_OUTPUT\ntime.sleep(1.5)"]  # outputs no one compares
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=60, kernel_name="python3", extra_arguments=QUIET_KERNEL,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(cwd=str(tmp_path))
    text = ["".join(o.get("text", "") for o in cell.outputs) for cell in nb.cells]
    beats = [[line for line in t.splitlines() if line.startswith("… ")] for t in text]
    assert [bool(b) for b in beats] == [False, True, True, False, False, True], text
    assert re.fullmatch(r"… \d s into the cell, on line 2: pause\(\)", beats[1][0]), beats
    assert re.fullmatch(r"… \d s into the cell, on line 2: time.sleep\(1.5\)", beats[2][-1]), beats
    assert nb.cells[3].outputs == [] and text[4] == "resuming ... done\n", text
    # the masters' comparison drops them: the first rule of the sanitizer
    regex, replace = re.findall(r"^regex: (.*)$\n^replace: (.*)$", SANITIZE.read_text(), flags=re.MULTILINE)[0]
    assert re.sub(regex, replace, text[2]) == "waiting\n"
    passed = "exercise 1: the visible checks passed (grading also runs hidden checks)\n"
    assert re.sub(regex, replace, text[1]) == passed
