"""Pictures: the two processes of a crash-and-resume on one timeline, and crash matrices as heatmaps."""

from __future__ import annotations

from typing import Sequence

from crashlab.audit import Event
from crashlab.harness import Matrix, ProcessRun

_COLORS = {"model": "#4c72b0", "charge": "#55a868", "reservation": "#8172b2", "confirmation": "#c44e52"}


def timeline(runs: Sequence[ProcessRun], events: Sequence[Event], title: str = "", ax=None):
    """One lane per agent process: its lifetime as a bar, model calls and effects as markers,
    repeats and duplicates outlined in red, and a cross where SIGKILL struck."""
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("timeline needs at least one process run")
    t0 = min(run.started for run in runs)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1.2 + 0.9 * len(runs)))
    lanes = {run.pid: i for i, run in enumerate(runs)}
    for run in runs:
        y = lanes[run.pid]
        ax.barh(y, run.ended - run.started, left=run.started - t0, height=0.5, color="#eeeeee", edgecolor="#999999")
        if run.killed:
            ax.plot(run.ended - t0, y, marker="X", markersize=14, color="black", zorder=5)
            ax.annotate("SIGKILL", (run.ended - t0, y), xytext=(6, 10), textcoords="offset points", fontsize=8)
    seen = set()
    for event in events:
        if event.pid not in lanes:
            continue
        y = lanes[event.pid]
        marker = "o" if event.what == "model" else "s"
        ax.scatter(event.at - t0, y, s=70, marker=marker, color=_COLORS.get(event.what, "grey"),
                   edgecolors="red" if event.repeat else "white", linewidths=2.5 if event.repeat else 1, zorder=4,
                   label=None if event.what in seen else ("model call" if event.what == "model" else event.what))
        seen.add(event.what)
        if event.repeat:
            ax.annotate("repeat" if event.what == "model" else "DUPLICATE", (event.at - t0, y), xytext=(-12, -18),
                        textcoords="offset points", fontsize=8, color="red")
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"process {i + 1}" + (" (killed)" if run.killed else "") for i, run in enumerate(runs)])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first process started")
    ax.set_title(title or "crash and resume, as the world saw it (red outline: repeated call or duplicate effect)")
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
