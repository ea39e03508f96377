"""No line a lesson prints is wider than the notebook: JupyterLab at 1280 px with the file browser open shows about
95 characters of an output line (:data:`crashlab.plumbing.lines.LINE_WIDTH`). A wider line wraps at the edge, and a
crash table's columns then fall apart. These tests read the executed masters' stored outputs (what a learner sees
before running anything; nbval re-runs the masters and compares them), and the harness's own tables at their widest.

One kind of line is left out, because it cannot be shortened: a single token wider than the line (an idempotency
key printed whole on its own line), which cut would read as another key.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from crashlab.crash_points import BASELINE, row_label
from crashlab.harness.matrix import Matrix, resolve_points
from crashlab.harness.verdicts import Row
from crashlab.order import ORDER_ID
from crashlab.plumbing.lines import LINE_WIDTH

ROOT = Path(__file__).resolve().parents[2]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))
RICHER = ("text/html", "text/markdown", "image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json")


def shown_text(output) -> str:
    """The text of an output as Lab shows it: a stream's, or a result's plain text when it has no richer form."""
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    return "" if any(kind in data for kind in RICHER) else data.get("text/plain", "")


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > LINE_WIDTH and len(line.split()) > 1]


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_no_line_a_master_prints_is_wider_than_the_notebook(master):
    nb = nbformat.read(master, as_version=4)
    found = [f"cell {number} ({len(line)} characters): {line[:120]}"
             for number, cell in enumerate(nb.cells) if cell.cell_type == "code"
             for output in cell.get("outputs", []) for line in too_wide(shown_text(output))]
    assert not found, f"{master.name}: {len(found)} line(s) over {LINE_WIDTH} characters:\n" + "\n".join(found[:20])


def widest_matrix(fail: str | None, double: bool) -> Matrix:
    """A matrix of every crash point of the order (and, with ``double``, each with the longest second crash), its
    figures at their widest: two-digit counts (a refund sent twice reads "undone, 12 dups"), a recovery over a
    hundred seconds, a failing row with a long problem."""
    points = resolve_points("all", fail)  # the failure path's too: its undo steps have the longest names
    labels = [BASELINE, *points] + ([row_label(p, max(points, key=len)) for p in points] if double else [])
    rows = [Row(label, True, {}, 12, 14, 10, False, 123.45, verdict="cleanly undone" if fail else None,
                problems=[f"{label}: the resumed agent failed ({'a long reason ' * 12})"])
            for label in labels]
    return Matrix(str(ROOT / "solutions" / "compensating_agent_with_a_long_name.py"), ORDER_ID, "durable", rows, 1.0,
                  resumers=3, fail=fail, key_lifetime=1.5)


@pytest.mark.parametrize("fail", [None, "reserve_item:out_of_stock"])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_a_crash_table_at_its_widest_fits_the_notebook(fail, double):
    matrix = widest_matrix(fail, double)
    text = str(matrix)
    assert not too_wide(text), "\n".join(too_wide(text))
    table = matrix.table().splitlines()
    assert table[0].startswith("crash point") and table[0].rstrip().endswith("verdict")
    assert all(len(line.rstrip()) <= len(table[1]) for line in table)  # every cell within the rule's columns
    if double:  # a double crash's label too long for the column: "A +" alone, then "  B" beside its cells
        first = next(i for i, line in enumerate(table) if line.endswith(" +"))
        assert table[first + 1].startswith("  ") and table[first + 1].rstrip().endswith("FAIL")
