"""Pictures: the two processes of a crash-and-resume on one timeline, and crash matrices as heatmaps."""

from __future__ import annotations

from typing import Sequence

from crashlab.world.audit import Event
from crashlab.harness import Matrix, ProcessRun
from crashlab.crash_points import allowed_repeats

_COLORS = {"model": "#4c72b0", "charge": "#55a868", "reservation": "#8172b2", "confirmation": "#c44e52"}


def timeline(runs: Sequence[ProcessRun], events: Sequence[Event], title: str = "", ax=None):
    """One lane per agent process, events in the order the world saw them: model calls (circles) and
    effects (squares), repeats and duplicates in red, and a cross where SIGKILL struck.

    The x axis is the order of events, not seconds: the local model answers in milliseconds while
    each process spends about two seconds starting Python, so a time axis would hide every event in
    one pile. The seconds are in the lane labels.
    """
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("timeline needs at least one process run")
    lanes = {run.pid: i for i, run in enumerate(runs)}
    mine = [e for e in events if e.pid in lanes]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(8, 0.9 * len(mine) + 3), 1.4 + 1.0 * len(runs)))
    t0 = min(run.started for run in runs)
    for run in runs:
        y = lanes[run.pid]
        xs = [k for k, e in enumerate(mine) if e.pid == run.pid]
        start, end = (min(xs) - 0.5, max(xs) + 0.5) if xs else (0, 0.5)
        if run.killed:
            end += 0.5
        ax.barh(y, end - start, left=start, height=0.55, color="#f0f0f0", edgecolor="#999999", zorder=1)
        if run.killed:
            ax.plot(end, y, marker="X", markersize=15, color="black", zorder=5)
            ax.annotate("SIGKILL", (end, y), xytext=(8, 8), textcoords="offset points", fontsize=8)
    expected = _expected_repeats(runs, mine)
    seen = set()
    for k, event in enumerate(mine):
        y = lanes[event.pid]
        bad = event.repeat and k not in expected
        edge = EXPECTED if k in expected else "red" if bad else "white"
        ax.scatter(k, y, s=110, marker="o" if event.what == "model" else "s", color=_COLORS.get(event.what, "grey"),
                   edgecolors=edge, linewidths=3 if event.repeat else 1, zorder=4,
                   label=None if event.what in seen else ("model call" if event.what == "model" else event.what))
        seen.add(event.what)
        text = event.label.replace(" (repeat of", "\n(repeat of")
        if bad and event.what != "model":
            text += "\nDUPLICATE"
        if k in expected:
            text += "\nexpected: its answer\ndied with the process"
        ax.annotate(text, (k, y), xytext=(0, -26), textcoords="offset points", ha="center", va="top", fontsize=7,
                    color=EXPECTED_TEXT if k in expected else "red" if bad else "#333333")
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"process {i + 1}\n{'killed' if run.killed else 'exit ' + str(run.returncode)}, "
                        f"{run.started - t0:.1f}-{run.ended - t0:.1f} s" for i, run in enumerate(runs)], fontsize=8)
    ax.set_ylim(len(runs) - 0.3, -0.6)
    ax.set_xticks([])
    ax.set_xlabel("events in the order the world recorded them")
    ax.set_title(title or "crash and resume, as the world saw it")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.figure.tight_layout()
    return ax


EXPECTED = "#e0a526"        # the one unavoidable repeat: an answer that died in flight (after:model#N)
EXPECTED_TEXT = "#a06b00"
NOT_REACHED = "#d9d9d9"


def _expected_repeats(runs: Sequence[ProcessRun], events: Sequence[Event]) -> set[int]:
    """Indexes of the repeated model calls no engine can avoid: the first repeat after a process that was
    killed while its last event was a model call (the answer was logged by the world, never delivered)."""
    expected, owed = set(), 0
    by_pid = {run.pid: run for run in runs}
    last_of = {}
    for k, event in enumerate(events):
        last_of[event.pid] = k
    for k, event in enumerate(events):
        if event.what == "model" and event.repeat and owed:
            expected.add(k)
            owed -= 1
        run = by_pid.get(event.pid)
        if run is not None and run.killed and last_of[event.pid] == k and event.what == "model":
            owed += 1
    return expected


def matrix_heatmap(matrices: Sequence[Matrix], labels: Sequence[str] | None = None, ax=None):
    """Crash points down, one column per agent and measure (duplicates, repeated model calls,
    unfinished); a darker red cell is a worse outcome, and the number is the count. The one repeat no
    engine can avoid (at ``after:model#N``) is drawn in amber, and a crash point that was never reached
    in grey, so neither passes for clean or for a real failure."""
    import matplotlib.pyplot as plt
    import numpy as np

    labels = list(labels or [m.agent.rsplit("/", 1)[-1] for m in matrices])
    points = [row.point for row in matrices[0].rows]
    columns, values = [], []
    for label, matrix in zip(labels, matrices):
        by_point = {row.point: row for row in matrix.rows}
        for measure in ("duplicates", "repeated", "unfinished"):
            columns.append(f"{label}\n{measure}")
            values.append([
                (by_point[p].duplicates if measure == "duplicates" else
                 by_point[p].repeated_model_calls if measure == "repeated" else int(not by_point[p].finished))
                if p in by_point else np.nan for p in points])
    data = np.array(values, dtype=float).T
    if ax is None:
        _, ax = plt.subplots(figsize=(1.3 * len(columns) + 2.5, 0.32 * len(points) + 1.5))
    ax.imshow(data, cmap="Reds", vmin=0, vmax=max(2.0, np.nanmax(data) if data.size else 2.0), aspect="auto")
    from matplotlib.patches import Patch, Rectangle

    reached = [{row.point: row.reached for row in matrix.rows} for matrix in matrices]
    special = {}
    for (i, j), value in np.ndenumerate(data):
        point, measure = points[i], ("duplicates", "repeated", "unfinished")[j % 3]
        if not reached[j // 3].get(point, True):
            special[i, j] = (NOT_REACHED, "not\nreached")
        elif measure == "repeated" and allowed_repeats(point) and value == 1:
            special[i, j] = (EXPECTED, "1")
    for (i, j), value in np.ndenumerate(data):
        color, text = special.get((i, j), (None, "" if np.isnan(value) else f"{value:.0f}"))
        if color:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color=color, zorder=2))
        ax.text(j, i, text, ha="center", va="center", fontsize=6 if "\n" in text else 8, zorder=3)
    ax.legend(handles=[Patch(color="#fcbba1", label="a real failure (darker: more)"),
                       Patch(color=EXPECTED, label="expected: the answer died in flight (after:model#N)"),
                       Patch(color=NOT_REACHED, label="crash point never reached")],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns, fontsize=8)
    ax.set_yticks(range(len(points)))
    ax.set_yticklabels(points, fontsize=8)
    ax.set_title("crash matrix: what each crash point cost")
    ax.figure.tight_layout()
    return ax
