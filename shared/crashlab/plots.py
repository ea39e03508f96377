"""Pictures: the two processes of a crash-and-resume on one timeline, and crash matrices as heatmaps."""

from __future__ import annotations

from typing import Sequence

from crashlab.audit import Event
from crashlab.harness import Matrix, ProcessRun

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
    seen = set()
    for k, event in enumerate(mine):
        y = lanes[event.pid]
        bad = event.repeat
        ax.scatter(k, y, s=110, marker="o" if event.what == "model" else "s", color=_COLORS.get(event.what, "grey"),
                   edgecolors="red" if bad else "white", linewidths=3 if bad else 1, zorder=4,
                   label=None if event.what in seen else ("model call" if event.what == "model" else event.what))
        seen.add(event.what)
        text = event.label.replace(" (repeat of", "\n(repeat of")
        if bad and event.what != "model":
            text += "\nDUPLICATE"
        ax.annotate(text, (k, y), xytext=(0, -26), textcoords="offset points", ha="center", va="top", fontsize=7,
                    color="red" if bad else "#333333")
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


def matrix_heatmap(matrices: Sequence[Matrix], labels: Sequence[str] | None = None, ax=None):
    """Crash points down, one column per agent and measure (duplicates, repeated model calls,
    unfinished); a darker cell is a worse outcome, and the number is the count."""
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
    for (i, j), value in np.ndenumerate(data):
        ax.text(j, i, "" if np.isnan(value) else f"{value:.0f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns, fontsize=8)
    ax.set_yticks(range(len(points)))
    ax.set_yticklabels(points, fontsize=8)
    ax.set_title("crash matrix: what each crash point cost")
    ax.figure.tight_layout()
    return ax
