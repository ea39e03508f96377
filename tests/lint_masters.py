"""Ruff's error checks (the F rules: undefined and unused names, syntax) over the masters' code, which `make lint`
runs (`pytest tests/lint_masters.py`; the suite itself does not, so it is not run twice): the notebooks' code cells,
which ruff reads from the .ipynb itself, and the files their ``%%writefile`` cells write, which it does not read
there (it skips a cell that starts with a cell magic), each cell's file checked on its own.

One idiom is not an error, though ruff reads it as one: a cell that starts a server only once per kernel,
``if "server" not in globals() or not server.is_ready(): server = ...`` -- the name is defined by then whenever it
is read. Its F821 is left out; any other undefined name is reported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))
RUFF = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F", "--output-format", "json", "--no-cache"]
ONCE_PER_KERNEL = re.compile(r"""if\s+["'](\w+)["']\s+not\s+in\s+globals\(\)""")


def ruff(args: list[str]) -> list[dict]:
    done = subprocess.run([*RUFF, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout or "[]")


def once_per_kernel(nb: nbformat.NotebookNode) -> set[str]:
    """The names the notebook's cells define only once per kernel (see the module's docstring)."""
    return {name for cell in nb.cells if cell.cell_type == "code" for name in ONCE_PER_KERNEL.findall(cell.source)}


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_a_masters_code_cells_have_no_undefined_or_unused_name(master):
    nb = nbformat.read(master, as_version=4)
    spared = once_per_kernel(nb)
    found = [f"{f['location']['row']}:{f['code']} {f['message']}" + (f" (cell {f.get('cell')})" if f.get("cell") else "")
             for f in ruff([str(master)])
             if not (f["code"] == "F821" and f["message"].split("`")[1] in spared)]
    assert found == [], f"{master.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_the_files_a_masters_cells_write_have_no_undefined_or_unused_name(master, tmp_path):
    written = {}
    for number, cell in enumerate(nbformat.read(master, as_version=4).cells, start=1):
        first, _, body = cell.source.partition("\n")
        if cell.cell_type == "code" and first.startswith("%%writefile") and first.endswith(".py"):
            path = tmp_path / f"cell{number:03d}" / first.split()[-1]  # each cell's file on its own
            path.parent.mkdir()
            path.write_text(body)
            written[str(path)] = f"cell {number} ({path.name})"
    found = [f"{written[f['filename']]} line {f['location']['row']}: {f['code']} {f['message']}"
             for f in (ruff([str(tmp_path)]) if written else [])]
    assert found == [], f"{master.name}:\n" + "\n".join(found)
