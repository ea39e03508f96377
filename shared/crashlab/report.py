"""An HTML report of crash matrices: a heatmap per run and a timeline for every row, self-contained."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Sequence

from crashlab.harness import Matrix


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def write_report(path: str | Path, sections: Sequence[tuple[str, Matrix]], title: str = "Crash matrices") -> Path:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from crashlab.plots import matrix_heatmap, timeline

    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}pre{background:#f6f6f6;padding:8px;"
             "overflow-x:auto}.fail{color:#b00}img{max-width:100%}</style>", f"<h1>{html.escape(title)}</h1>"]
    if sections:
        _, ax = plt.subplots(figsize=(1.3 * 3 * len(sections) + 2.5, 0.32 * len(sections[0][1].rows) + 1.8))
        matrix_heatmap([m for _, m in sections], labels=[label for label, _ in sections], ax=ax)
        parts.append(f"<img alt='heatmap' src='data:image/png;base64,{_png(ax.figure)}'>")
    for label, matrix in sections:
        verdict = "clean" if matrix.ok else f"<span class='fail'>{len(matrix.problems())} problem(s)</span>"
        parts.append(f"<h2>{html.escape(label)} — {verdict}</h2><pre>{html.escape(str(matrix))}</pre>")
        parts.append("<details><summary>timelines, one per crash point</summary>")
        for row in matrix.rows:
            if not row.runs:
                continue
            ax = timeline(row.runs, row.events, title=f"{label}: {row.point}")
            parts.append(f"<img alt='{html.escape(row.point)}' src='data:image/png;base64,{_png(ax.figure)}'>")
        parts.append("</details>")
    path = Path(path)
    path.write_text("\n".join(parts))
    return path
