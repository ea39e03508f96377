"""Pictures: the two processes of a crash-and-resume on one timeline, and crash matrices as heatmaps."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from crashlab.world.audit import Event
from crashlab.harness import Matrix, ProcessRun
from crashlab.crash_points import allowed_repeats, expected_repeat_forms

_COLORS = {"model": "#4c72b0", "charge": "#55a868", "reservation": "#8172b2", "confirmation": "#c44e52"}


def timeline(runs: Sequence[ProcessRun], events: Sequence[Event], title: str = "", ax=None):
    """One lane per agent process, events in the order the world saw them: model calls (circles) and
    effects (squares), repeats and duplicates in red, and a cross where SIGKILL struck.

    The x axis is the order of events, not seconds: the local model answers in milliseconds while
    each process spends a second or more starting Python, so a time axis would hide every event in
    one pile. The seconds are in the lane labels. The figure is as wide as a notebook at 100% and no
    wider, whatever the number of events: when they crowd, their labels take turns above and below.
    """
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("timeline needs at least one process run")
    lanes = {run.pid: i for i, run in enumerate(runs)}
    mine = [e for e in events if e.pid in lanes]
    if ax is None:
        _, ax = plt.subplots(figsize=(TIMELINE_IN, 1.3 + 1.45 * len(runs)))
    t0 = min(run.started for run in runs)
    right = 0.5
    for run in runs:
        y = lanes[run.pid]
        xs = [k for k, e in enumerate(mine) if e.pid == run.pid]
        start, end = (min(xs) - 0.5, max(xs) + 0.5) if xs else (0, 0.5)
        if run.killed:
            end += 0.5
        right = max(right, end)
        ax.barh(y, end - start, left=start, height=0.55, color="#f0f0f0", edgecolor="#999999", zorder=1)
        if run.killed:
            ax.plot(end, y, marker="X", markersize=15, color="black", zorder=5)
            ax.annotate("SIGKILL", (end, y), xytext=(12, 0), textcoords="offset points", ha="left",
                        va="center", fontsize=10)
    expected = _expected_repeats(runs, mine)
    # An event's label is about 110 px wide: side by side while the events are that far apart; when they
    # crowd, alternately above and below its marker, split before its number ("reservation\n#4").
    crowded = bool(mine) and 0.8 * TIMELINE_IN * 100 / (right + 1.5) < 110
    seen = set()
    for k, event in enumerate(mine):
        y = lanes[event.pid] if event.pid is not None else 0
        bad = event.repeat and k not in expected
        edge = EXPECTED if k in expected else "red" if bad else "white"
        ax.scatter(k, y, s=110, marker="o" if event.what == "model" else "s", color=_COLORS.get(event.what, "grey"),
                   edgecolors=edge, linewidths=3 if event.repeat else 1, zorder=4,
                   label=None if event.what in seen else ("model call" if event.what == "model" else event.what))
        seen.add(event.what)
        text = event.label.replace(" (repeat of", "\n(repeat of")
        if crowded:
            text = text.replace(" #", "\n#", 1)
        if bad and event.what != "model":
            text += "\nDUPLICATE"
        if k in expected:
            text += "\nexpected: the answer\ndied in flight"
        above = crowded and k % 2 == 1
        ax.annotate(text, (k, y), xytext=(0, 20 if above else -20), textcoords="offset points", ha="center",
                    va="bottom" if above else "top", fontsize=10,
                    color=EXPECTED_TEXT if k in expected else "red" if bad else "#333333")
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"process {i + 1}\n{'killed' if run.killed else 'exit ' + str(run.returncode)}, "
                        f"{run.started - t0:.1f}-{run.ended - t0:.1f} s" for i, run in enumerate(runs)], fontsize=10)
    ax.set_ylim(len(runs) - 0.25, -0.75)
    ax.set_xlim(-0.9, right + 1.5)  # room for SIGKILL right of its cross
    ax.set_xticks([])
    ax.set_title(title or "crash and resume, as the world saw it", fontsize=12)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=len(seen) or 1, fontsize=10, frameon=False,
              title="events, in the order the world recorded them", title_fontsize=10)
    ax.figure.tight_layout()
    return ax


TIMELINE_IN = 9.4           # inches at 100 dpi: within the notebook's 980 px with its labels

EXPECTED = "#e0a526"        # the one unavoidable repeat: an answer that died in flight (after: or mid:model#N)
EXPECTED_TEXT = "#a06b00"
NOT_REACHED = "#d9d9d9"


def _expected_repeats(runs: Sequence[ProcessRun], events: Sequence[Event]) -> set[int]:
    """Indexes of the repeated model calls no engine can avoid: the first repeat after a process that was
    killed while its last event was a model call (the answer was logged by the world, never delivered)."""
    expected: set[int] = set()
    owed = 0
    by_pid = {run.pid: run for run in runs}
    last_of: dict[int | None, int] = {}
    for k, event in enumerate(events):
        last_of[event.pid] = k
    for k, event in enumerate(events):
        if event.what == "model" and event.repeat and owed:
            expected.add(k)
            owed -= 1
        run = by_pid.get(event.pid) if event.pid is not None else None
        if run is not None and run.killed and last_of[event.pid] == k and event.what == "model":
            owed += 1
    return expected


# --- the heatmap: the notebooks' and the demo page's -------------------------------------------------

CLEAN = "#e5f5e0"           # a measure at zero: pale green, so that it reads as "checked, fine", not as empty
FAILURE = "#fb6a4a"         # the legend's red: a real failure (darker cells: more of it)
MEASURES = ("dup", "rep", "unf")
MEASURE_WORDS = "dup = duplicate effects, rep = repeated model calls, unf = order unfinished (1 = yes)"
AGENTS_PER_IMAGE = 3        # 2.3 in of labels + 3 agents x 3 columns x 0.7 in = 860 px: within a notebook's 980


def short_name(matrix: Matrix) -> str:
    """``naive_dbos_agent.py`` -> ``naive_dbos``: a column label short enough for a projector."""
    name = Path(matrix.agent).stem
    return name[: -len("_agent")] if name.endswith("_agent") and name != "_agent" else name


# --- the heatmap -------------------------------------------------------------------------------------

def heatmap_cell(row, measure: str) -> tuple[str, str]:
    """(fill colour, text) for one row and measure, in the notebooks' colours."""
    import matplotlib

    if row is None:
        return "white", ""
    if not row.reached:
        return NOT_REACHED, "–"
    value = {"dup": row.duplicates, "rep": row.repeated_model_calls, "unf": int(not row.finished)}[measure]
    if measure == "rep" and value == 1 and allowed_repeats(row.point):
        return EXPECTED, "1"
    if value == 0:
        return CLEAN, "0"
    return matplotlib.colormaps["Reds"](0.5 + 0.13 * min(value - 1, 3)), str(value)


def lesson_heatmap(matrices: Sequence[Matrix], title: str, names: Sequence[str] | None = None,
                   files: Sequence[str] | None = None):
    """A few agents side by side: crash points down, three short columns per agent (dup, rep, unf), numbers
    large enough to read from the back of a room, and a key under the picture. Returns the figure.

    Each agent is headed by its name and, with ``files``, under it the agent file its columns hold. The figure
    is sized in inches at :data:`~crashlab.report.figures.DPI`, so the PNG is shown at its own size and 13 pt
    stays 13 pt: at most :data:`AGENTS_PER_IMAGE` agents fit a notebook's width (:func:`matrix_heatmap`
    makes one figure per group of them)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from matplotlib.textpath import TextPath

    from crashlab.report.figures import DPI, WIDTH_PX

    names = list(names or [short_name(m) for m in matrices])
    points = []
    for matrix in matrices:
        points += [row.point for row in matrix.rows if row.point not in points]
    columns = len(MEASURES) * len(matrices)
    # Laid out in inches, not by tight_layout: the key under the picture must never squeeze the cells. The crash
    # points' column is as wide as its longest label (a double crash's two points); the cells give up what that
    # takes from the notebook's width (0.3 in: the PNG's margins), down to the width their numbers need.
    label_w = max(TextPath((0, 0), point, size=11).get_extents().width for point in points) / 72
    expected = "expected: 1 repeat at " + "\nor ".join(expected_repeat_forms(points))
    left, top, below, key = max(2.3, label_w + 0.3), 0.7 + (0.45 if files else 0), 0.35, 1.0 + 0.2 * expected.count("\n")
    cell_w, cell_h = max(0.5, min(0.7, (WIDTH_PX / DPI - 0.3 - left - 0.15) / columns)), 0.32
    width, height = left + cell_w * columns + 0.15, top + cell_h * len(points) + below + key
    fig = plt.figure(figsize=(width, height), dpi=DPI)  # not shrunk on a page or in a notebook
    ax = fig.add_axes((left / width, (below + key) / height, cell_w * columns / width, cell_h * len(points) / height))
    for j, matrix in enumerate(matrices):
        by_point = {row.point: row for row in matrix.rows}
        for m, measure in enumerate(MEASURES):
            x = len(MEASURES) * j + m
            for i, point in enumerate(points):
                colour, text = heatmap_cell(by_point.get(point), measure)
                ax.add_patch(Rectangle((x - 0.5, i - 0.5), 1, 1, facecolor=colour, edgecolor="white", lw=2))
                if colour == NOT_REACHED:  # hatched too, so it cannot pass for clean on a washed-out projector
                    ax.add_patch(Rectangle((x - 0.45, i - 0.4), 0.9, 0.8, fill=False, hatch="//",
                                           edgecolor="#a0a0a0", lw=0))
                dark = text.isdigit() and int(text) >= 3 and colour not in (CLEAN, EXPECTED)
                ax.text(x, i, text, ha="center", va="center", fontsize=13, color="white" if dark else "black")
        centre = len(MEASURES) * j + 1
        if files:
            ax.text(centre, -0.6, files[j], ha="center", va="bottom", fontsize=10)
        ax.text(centre, -1.15 if files else -0.75, names[j], ha="center", va="bottom", fontsize=12, weight="bold")
        if j:
            ax.axvline(len(MEASURES) * j - 0.5, color="#333333", lw=2.5)
    ax.set_xlim(-0.5, columns - 0.5)
    ax.set_ylim(len(points) - 0.5, -0.5)
    ax.set_xticks(range(columns), [MEASURES[k % len(MEASURES)] for k in range(columns)], fontsize=11)
    ax.set_yticks(range(len(points)), points, fontsize=11)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.text(0.1 / width, 1 - 0.1 / height, title, ha="left", va="top", fontsize=14)
    fig.legend(handles=[Patch(color=FAILURE, label="real failure (number = count)"),
                        Patch(color=EXPECTED, label=expected),
                        Patch(facecolor=NOT_REACHED, edgecolor="#a0a0a0", hatch="//", label="– never reached"),
                        Patch(color=CLEAN, label="0: clean")],
               loc="upper left", bbox_to_anchor=(0.1 / width, key / height), ncol=2, fontsize=11, frameon=False,
               title=MEASURE_WORDS, title_fontsize=10, alignment="left", borderaxespad=0)
    return fig


def matrix_heatmap(matrices: Sequence[Matrix], labels: Sequence[str] | None = None,
                   title: str = "crash matrix: what each crash point cost", groups: Sequence[str] | None = None):
    """The notebooks' heatmap: :func:`lesson_heatmap` for every :data:`AGENTS_PER_IMAGE` agents, each column
    headed by its label and its agent file. Returns the figures (show them with
    :func:`crashlab.report.figures.show_figure`): more agents make more figures, never a wider one.

    ``groups`` (one key per matrix, such as its lesson) keeps the agents of one group in one figure when they
    fit, so a lesson added to a comparison adds a figure instead of splitting its neighbours."""
    if not matrices:
        raise ValueError("matrix_heatmap needs at least one matrix")
    labels = list(labels or [short_name(m) for m in matrices])
    chunks = _chunks(list(groups) if groups is not None else list(range(len(matrices))), AGENTS_PER_IMAGE)
    figures = []
    for n, chunk in enumerate(chunks, 1):
        heading = title if len(chunks) == 1 else f"{title} ({n} of {len(chunks)})"
        figures.append(lesson_heatmap([matrices[k] for k in chunk], heading, [labels[k] for k in chunk],
                                      [Path(matrices[k].agent).name for k in chunk]))
    return figures


def _chunks(keys: list, size: int) -> list[list[int]]:
    """Indexes of ``keys`` in runs of at most ``size``; a run of equal keys starts a new chunk when it would
    not fit in the current one, and is split only when it is longer than ``size`` itself."""
    chunks: list[list[int]] = [[]]
    k = 0
    while k < len(keys):
        end = k
        while end < len(keys) and keys[end] == keys[k]:
            end += 1
        run = range(k, end)
        if chunks[-1] and len(chunks[-1]) + len(run) > size:
            chunks.append([])
        for j in run:
            if len(chunks[-1]) == size:
                chunks.append([])
            chunks[-1].append(j)
        k += len(run)
    return chunks
