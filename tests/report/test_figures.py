"""Every figure a learner sees is legible at 100% in JupyterLab at 1,024 px: no wider than the notebook's content
(980 px at the figure's dpi) and no text under 10 pt. The committed outputs of every master are read as they are
(no notebook is run); each picture must carry the stamp :func:`crashlab.report.figures.png` writes, so a figure
drawn outside the course's helpers, or shown with ``plt.show()``, fails here too. Then the helpers themselves:
the widest cases the lessons can make still fit."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest

from crashlab.report.figures import DPI, DPI_KEY, FONT_KEY, MIN_PT, WIDTH_PX, png, png_size, png_text, smallest_font
from test_report import AGENTS, NAIVE, POINTS, matrix, row  # matrices built by hand, no processes

MASTERS = sorted((Path(__file__).resolve().parents[2] / "solutions").glob("*.ipynb"))


def pictures(path: Path):
    """(cell index, mime type, data) for every image output the master holds."""
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        for output in cell.get("outputs", []):
            for mime, data in output.get("data", {}).items():
                if mime.startswith("image/"):
                    yield index, mime, data


def problems(data: bytes) -> list[str]:
    stamp = png_text(data)
    width, height = png_size(data)
    if FONT_KEY not in stamp or DPI_KEY not in stamp:
        return [f"{width}x{height} px with no font stamp: not shown through crashlab.lessons.show_figure"]
    found = []
    if width > WIDTH_PX:
        found.append(f"{width} px wide: more than the {WIDTH_PX} px of a notebook at 100% (split it, or narrow it)")
    if float(stamp[FONT_KEY]) < MIN_PT or float(stamp[DPI_KEY]) < DPI:
        found.append(f"text of {stamp[FONT_KEY]} pt at {stamp[DPI_KEY]} dpi: under {MIN_PT} pt at {DPI} dpi")
    return found


@pytest.mark.parametrize("master", MASTERS, ids=[m.stem for m in MASTERS])
def test_every_saved_figure_fits_the_notebook_and_has_no_small_text(master):
    found = []
    for index, mime, data in pictures(master):
        if mime != "image/png":
            found.append(f"cell {index}: a {mime} figure (the course's figures are stamped PNGs)")
            continue
        found += [f"cell {index}: {p}" for p in problems(base64.b64decode(data))]
    assert not found, f"{master.name}:\n" + "\n".join(found)


def test_a_figure_without_the_stamp_or_with_small_text_is_caught():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 2), dpi=DPI)
    ax.annotate("tiny", (0.5, 0.5), fontsize=7)
    assert smallest_font(fig) == 7
    stamped = png(fig)
    plain = io.BytesIO()
    fig.savefig(plain, format="png", dpi=DPI)
    plt.close(fig)
    assert any("no font stamp" in p for p in problems(plain.getvalue()))
    assert any("px wide" in p for p in problems(stamped)) and any("7 pt" in p for p in problems(stamped))


def test_the_widest_timeline_and_a_long_matrix_comparison_fit():
    import matplotlib.pyplot as plt

    from crashlab.harness import ProcessRun
    from crashlab.report.plots import matrix_heatmap, timeline
    from crashlab.world.audit import Event

    runs = [ProcessRun(11, -9, 0.0, 9.0, "", ""), ProcessRun(12, 0, 9.5, 20.0, "", "")]
    events = [Event(k, 11 if k < 9 else 12, "model" if k % 2 else "reservation", f"reservation #{k}",
                    repeat=k == 9) for k in range(16)]
    drawn = [timeline(runs, events, title="sixteen events").figure]
    lessons = [lesson for lesson, *_ in AGENTS] + ["08_frameworks"] * 3  # a lesson more: one figure more
    matrices = [matrix(agent, expect, bad) for _, agent, expect, bad in AGENTS] + [matrix("x_agent.py", "observe", NAIVE)] * 3
    heatmaps = matrix_heatmap(matrices, labels=lessons, groups=lessons)
    fewer = matrix_heatmap(matrices[:9], groups=lessons[:9])
    for fig in fewer:
        plt.close(fig)
    assert len(heatmaps) == 5 and len(fewer) == 4
    for fig in drawn + heatmaps[:1] + heatmaps[-1:]:  # three agents with their files, and the new lesson's alone
        data = png(fig)
        assert not problems(data), problems(data)
    for fig in drawn + heatmaps:
        plt.close(fig)


def test_three_agents_with_the_longest_double_crashes_fit():
    """A double crash's row label is two points: the longest, on a failure path's undo steps, still leaves three
    agents' columns inside the notebook's width (the label column grows, the cells give way)."""
    import matplotlib.pyplot as plt

    from crashlab.crash_points import double_crash_pairs, row_label
    from crashlab.harness import Matrix
    from crashlab.report.plots import matrix_heatmap

    pairs = [pair for fail in (None, "reserve_item", "card_declined") for pair in double_crash_pairs(None, fail=fail)]
    longest = sorted({row_label(*pair) for pair in pairs}, key=len)[-4:]
    agents = ("pai_temporal_agent.py", "pai_dbos_agent.py", "pai_restate_agent.py")
    matrices = [Matrix(f"/lessons/{agent}", "ORD-8842", "durable", [row(p) for p in POINTS + longest], 9.0)
                for agent in agents]
    [fig] = matrix_heatmap(matrices, labels=["Temporal", "DBOS", "Restate"],
                           title="one Pydantic AI agent on three engines: what each crash point cost")
    data = png(fig)
    plt.close(fig)
    assert not problems(data), problems(data)
