"""What the user's screen showed at each crash point, for the agents that stream: the screen audit's verdict per row,
counted for the page's headings and summary (:func:`screen_rows_wrong`) and drawn as a small table per agent
(:func:`screen_table`).

The verdict is the matrix's own (:func:`crashlab.harness.judge_screen`): every finding of the audit, and retractions
beyond the one allowed where the user watched an answer that never arrived whole. It is applied here to every agent,
the naive ones included, so a naive relay's page shows what its screen got wrong even though its matrix judges
nothing."""

from __future__ import annotations

import html

from crashlab.crash_points import allowed_retractions
from crashlab.harness import Matrix, Row, judge_screen
from crashlab.plumbing.tracebacks import cut_at_word
from crashlab.world.screen_audit import FINDINGS


def screen_problems(row: Row) -> list[str]:
    """What was wrong on the user's screen in ``row`` (none for a row that showed nothing or was never reached)."""
    if row.screen is None or not row.reached:
        return []
    return judge_screen(row.point, row.screen)


def streams(matrix: Matrix) -> bool:
    """Whether the agent showed anything on the user's screen in any row: a streaming agent."""
    return any(row.screen is not None for row in matrix.rows)


def screen_rows_wrong(matrix: Matrix) -> int:
    """The reached rows whose screen was not exact."""
    return sum(bool(screen_problems(row)) for row in matrix.rows)


def _verdict(row: Row, observe: bool) -> str:
    if not row.reached:
        return "never reached"
    if row.screen is None:
        return "nothing shown"
    problems = screen_problems(row)
    if not problems:
        return "clean"
    first = problems[0].removeprefix(f"{row.point}: ").removeprefix("on the user's screen, ")
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return ("what the naive relay does: " if observe else "FAILED: ") + cut_at_word(first, 70) + more


def screen_table(matrix: Matrix) -> str:
    """The agent's screen verdict per crash point, as HTML: each finding's count, the retractions against those
    allowed there, and the verdict in words (``clean``, or the first problem quoted); "" for an agent that never
    showed anything."""
    if not streams(matrix):
        return ""
    observe = matrix.expect == "observe"
    head = ["crash point", *FINDINGS, "retractions (allowed)", "the screen"]
    out = ["<table class='screen'><caption>what the user's screen showed, per crash point</caption><thead><tr>",
           "".join(f"<th>{html.escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in matrix.rows:
        problems = screen_problems(row)
        cls = "clean" if row.screen is not None and row.reached and not problems else "wrong" if problems else "none"
        shown = row.screen if row.reached else None
        cells = [f"<td><code>{html.escape(row.point)}</code></td>"]
        cells += [f"<td class='n'>{shown.counts[name] if shown else '–'}</td>" for name in FINDINGS]
        cells.append(f"<td class='n'>{shown.retractions} ({allowed_retractions(row.point)})</td>"
                     if shown else "<td class='n'>–</td>")
        cells.append(f"<td>{html.escape(_verdict(row, observe))}</td>")
        out.append(f"<tr class='point {cls}'>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


CSS = """
table.screen{border-collapse:collapse;width:100%;font-size:14px;line-height:1.25;margin:8px 0}
table.screen caption{text-align:left;font-weight:bold;padding:2px 0}
table.screen th,table.screen td{padding:3px 5px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
table.screen th{vertical-align:bottom;font-weight:normal;color:#555} table.screen td.n{text-align:right}
tr.point.wrong td{background:#fde0dd} tr.point.clean td:last-child{color:#1a6b2a}
"""

__all__ = ["CSS", "screen_problems", "screen_rows_wrong", "screen_table", "streams"]
