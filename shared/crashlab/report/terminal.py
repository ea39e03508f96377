"""The demo's closing summary in a terminal: one line of totals per agent, then crash points down and agents across.
It counts with the page's :func:`crashlab.report.tally`, so the terminal and the page say the same thing."""

from __future__ import annotations

from pathlib import Path

from crashlab.crash_points import allowed_repeats
from crashlab.plumbing.lines import LINE_WIDTH, fit

WIDTH = LINE_WIDTH  # the demo's terminal output fits a 100-column terminal, a projected one and a notebook


def terminal_summary(sections, width: int = WIDTH, unjudged: dict[int, str] | None = None) -> str:
    """The demo's closing summary, no line wider than ``width``: one line of totals per agent, under a
    letter, then crash points down and those letters across (in blocks, if there are many agents), then the
    headline the page leads with. ``sections``: ``(label, matrix)`` or ``(label, matrix, lesson)``, as for the
    HTML report; the counts and verdicts are the report's (:func:`crashlab.report.tally`); ``unjudged``: by
    ``id(matrix)``, why a failed matrix could not judge its agent."""
    from crashlab.report import lead_text, lesson_number, sections_with_lessons, tally, verdict

    unjudged = unjudged or {}
    rows = sections_with_lessons(sections)
    codes = [chr(ord("A") + k) if k < 26 else str(k + 1) for k in range(len(rows))]
    names = [Path(m.agent).name for _, m, _ in rows]
    name_w = min(24, max([len(n) for n in names] + [5]))
    out = fit("every agent over its reached crash points: dup = duplicate effects, rep = avoidable repeated "
              "model calls, unf = unfinished orders (the naive agents are there to show them)", width).splitlines()
    out.append(f"{'':<3}{'##':<4}{'agent':<{name_w}}  {'expects':<10} {'points':>6} {'dup':>4} {'rep':>4} "
               f"{'unf':>4}  verdict")
    for code, name, (_, matrix, lesson) in zip(codes, names, rows):
        t = tally(matrix)
        name = name if len(name) <= name_w else name[:name_w - 1] + "~"
        line = (f"{code:<3}{lesson_number(lesson)[:3]:<4}{name:<{name_w}}  {t.expect:<10} "
                f"{f'{t.reached}/{t.points}':>6} {t.duplicates:>4} {t.avoidable:>4} {t.unfinished:>4}  "
                f"{verdict(matrix, short=True, unjudged=unjudged.get(id(matrix)))}")
        out.append(line[:width])
    out += [""] + fit("per crash point, cells dup/rep/unf (rep counts every repeat here): ! a real failure, "
                      "* the one expected repeat at after:model#N or mid:model#N@chunkK (the answer died on its way), "
                      "- never reached", width).splitlines()
    out += _grid(codes, [m for _, m, _ in rows], width)
    out += ["", *fit(lead_text(rows, unjudged) + ".", width).splitlines()]
    return "\n".join(out)


def _cell(row) -> str:
    if row is None:
        return ""
    if not row.reached:
        return "-"
    allowed = allowed_repeats(row.point)
    bad = row.duplicates or row.repeated_model_calls > allowed or not row.finished
    star = "*" if allowed and row.repeated_model_calls == 1 else ""
    return f"{row.duplicates}/{row.repeated_model_calls}{star}/{int(not row.finished)}" + ("!" if bad else "")


def _grid(codes, matrices, width: int) -> list[str]:
    """Crash points down, agents across in as many blocks as ``width`` needs."""
    points = []
    for matrix in matrices:
        points += [row.point for row in matrix.rows if row.point not in points]
    cells = [[_cell(next((r for r in m.rows if r.point == p), None)) for m in matrices] for p in points]
    point_w = max(len(p) for p in points + ["crash point"])
    widest = max([len(c) for line in cells for c in line] + [len(c) for c in codes])
    cell_w = widest + 2  # two spaces between cells, or one where that keeps every agent in a single block
    if (width - point_w) // cell_w < len(matrices) <= (width - point_w) // (widest + 1):
        cell_w = widest + 1
    per_block = max(1, (width - point_w) // cell_w)
    out = []
    for start in range(0, len(matrices), per_block):
        block = slice(start, start + per_block)
        out.append((f"{'crash point':<{point_w}}" + "".join(f"{c:>{cell_w}}" for c in codes[block])).rstrip())
        out += [(f"{p:<{point_w}}" + "".join(f"{c:>{cell_w}}" for c in line[block])).rstrip()
                for p, line in zip(points, cells)]
        out.append("")
    return out[:-1]
