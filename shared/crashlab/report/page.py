"""The demo report: one self-contained HTML page made to be shown to a room on a 1,024 x 768 projector.

At the top, a summary table (one row per agent, verdict in words) and a colour key; then one section per
lesson with a small heatmap (a lesson has one or two agents, so a picture has a few columns, drawn at
the size it is shown and never shrunk: 13 pt numbers at 100 dpi), a heading per agent that says what
happened, and the per-row timelines folded away in ``<details>``. The counting (:func:`tally`, :func:`headline`) is shared
with the terminal summary in :mod:`crashlab.report.terminal`, so the page and the terminal say the same thing.

Stable hooks for tests: ``table.summary`` (one ``tr.agent`` per agent), ``section.lesson`` with
``id='lesson-NN'``, ``img.heatmap`` (alt text names the lesson), ``h3.agent``, ``img.timeline``, and for an agent that
streams to the user's screen ``table.screen`` (one ``tr.point`` per crash point, ``wrong`` or ``clean``).
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from crashlab.harness import Matrix
from crashlab.crash_points import allowed_repeats, expected_repeat_forms
from crashlab.plumbing.outputs import REPORT, REPORT_HEAD, write_output
from crashlab.report.figures import DPI, png, png_size
from crashlab.report.screen import CSS as SCREEN_CSS, screen_rows_wrong, screen_table, streams
from crashlab.report.plots import (AGENTS_PER_IMAGE, CLEAN, EXPECTED, FAILURE, MEASURE_WORDS, NOT_REACHED, lesson_heatmap,
                                   short_name)

PAGE_PX = 900               # no heatmap wider than this, so it fits a 1,024 px window with margins


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --- counting ----------------------------------------------------------------------------------------

@dataclass
class Tally:
    """One agent's matrix in totals, over the crash points that were reached (an unreached point was not
    tested: its audit says nothing about the agent)."""

    expect: str
    points: int
    reached: int
    duplicates: int
    avoidable: int      # repeated model calls beyond the one unavoidable repeat where an answer died in flight
    expected: int       # those unavoidable repeats
    unfinished: int
    problems: int
    screen: int = 0     # reached points where the user's screen was not exact (text twice, lost, ...): streaming agents

    @property
    def bad(self) -> bool:
        return bool(self.duplicates or self.avoidable or self.unfinished or self.screen)


def tally(matrix: Matrix) -> Tally:
    reached = [row for row in matrix.rows if row.reached]
    allowed = [allowed_repeats(row.point) for row in reached]
    return Tally(matrix.expect, len(matrix.rows), len(reached), sum(row.duplicates for row in reached),
                 sum(max(0, row.repeated_model_calls - a) for row, a in zip(reached, allowed)),
                 sum(min(row.repeated_model_calls, a) for row, a in zip(reached, allowed)),
                 sum(not row.finished for row in reached), len(matrix.problems()), screen_rows_wrong(matrix))


def _facts(t: Tally) -> str:
    facts = [_plural(t.duplicates, "duplicate effect"), _plural(t.avoidable, "avoidable repeat")]
    if t.unfinished:
        facts.append(f"{t.unfinished} unfinished")
    if t.screen:
        facts.append(f"{_plural(t.screen, 'screen')} wrong")  # the user's, at that many crash points
    return ", ".join(facts)


def _at(t: Tally) -> str:
    text = f"at {_plural(t.reached, 'crash point')}"
    if t.reached < t.points:
        text += f" ({t.points - t.reached} never reached)"
    return text


def headline(matrix: Matrix, unjudged: str | None = None) -> str:
    """What happened, in one line: the counts a naive agent is there to show, or the durable claim held (or,
    ``unjudged``: why the run could not tell)."""
    t = tally(matrix)
    if unjudged and t.expect != "observe":
        return f"could not judge ({t.expect}): {unjudged}"
    if t.expect == "observe":
        if t.bad:
            return f"{_facts(t)} {_at(t)} — what the naive version does"
        return f"no failure showed {_at(t)} (observed, not judged)"
    if not matrix.ok:
        return f"FAILED ({t.expect}): {_facts(t)}, {_plural(t.problems, 'problem')} {_at(t)}"
    if t.expect == "durable":
        return f"durable: 0 duplicates{', the screen clean' if streams(matrix) else ''} {_at(t)}"
    return (f"no avoidable repeats {_at(t)}"
            + (f"; {_plural(t.duplicates, 'duplicate effect')}, allowed here" if t.duplicates else ""))


def verdict(matrix: Matrix, short: bool = False, unjudged: str | None = None) -> str:
    """The summary table's last column, in words (``short`` for the terminal; ``unjudged``: the run could not tell,
    and why)."""
    t = tally(matrix)
    if unjudged and t.expect != "observe":
        return "not judged: too loaded" if short else "could not judge: the machine was too loaded"
    if t.expect == "observe":
        if not t.bad:
            return "no failure showed"
        return "shows the failure" if short else "naive on purpose: shows the failure"
    if not matrix.ok:
        return f"FAILED: {_plural(t.problems, 'problem')}"
    if t.expect == "durable":
        return "held" if short else "held at every crash point"
    return "held (dups allowed)" if short else "held (duplicates allowed here)"


def lesson_number(lesson: str) -> str:
    """``01_naive_event_log`` -> ``01``; a name without a number stays whole."""
    return lesson[:2] if lesson[:2].isdigit() else lesson


def agent_title(label: str, lesson: str) -> str:
    """The label without its lesson number: ``01 naive log (...)`` -> ``naive log (...)``."""
    number = lesson_number(lesson)
    return label[len(number):].strip() if label.startswith(number) and label != number else label


def sections_with_lessons(sections) -> list[tuple[str, Matrix, str]]:
    """``(label, matrix)`` or ``(label, matrix, lesson)``; without a lesson, the label's first word is
    used when it is a lesson number ("01 naive log"), else the whole label."""
    out = []
    for section in sections:
        label, matrix = section[0], section[1]
        lesson = section[2] if len(section) > 2 else label.split()[0] if label[:2].isdigit() else label
        out.append((label, matrix, lesson))
    return out


# --- the page ----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:17px;line-height:1.4;color:#222;
  max-width:940px;margin:0 auto;padding:16px 28px 48px}
h1{font-size:28px;margin:8px 0 4px} h2{font-size:23px;margin:36px 0 6px;border-top:2px solid #ccc;padding-top:14px}
h3{font-size:19px;margin:22px 0 2px} p.sub{margin:0 0 6px;color:#555}
h3.fail{color:#b00} h3.observe{color:#8a4b00} h3.ok{color:#1a6b2a}
p.lead{font-size:19px;margin:4px 0 14px}
table.summary{border-collapse:collapse;width:100%;font-size:15px;line-height:1.25;margin:10px 0}
table.summary th,table.summary td{padding:4px 6px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
table.summary td.n{text-align:right;font-variant-numeric:tabular-nums} table.summary small{color:#555}
table.summary b{font-weight:normal;white-space:nowrap} table.summary th{vertical-align:bottom}
table.summary .n{width:4.5em}
tr.fail td{background:#fde0dd} tr.observe td{background:#fff6e5} tr.unjudged td{background:#eceff4}
h3.unjudged{color:#445}
.key span{display:inline-block;margin:0 16px 4px 0;white-space:nowrap}
.key i{display:inline-block;width:18px;height:18px;vertical-align:-3px;margin-right:6px;border:1px solid #999}
img.heatmap{display:block;max-width:100%;height:auto;margin:8px 0}
img.timeline{max-width:100%;height:auto}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:13px}
""" + SCREEN_CSS


def _png(fig, **kwargs) -> tuple[str, int, int]:
    """The figure as base64 PNG, and its pixel size (so the page can state it and the browser need not
    guess)."""
    import matplotlib.pyplot as plt

    data = png(fig, dpi=kwargs.pop("dpi", DPI))
    plt.close(fig)
    width, height = png_size(data)
    return base64.b64encode(data).decode(), width, height


def _kind(matrix: Matrix, unjudged: Mapping[int, str] | None = None) -> str:
    """The CSS class of an agent's row and heading: a naive agent (observed), a claim that held, one the run could
    not judge, a failure."""
    if matrix.expect == "observe":
        return "observe"
    return "ok" if matrix.ok else "unjudged" if (unjudged or {}).get(id(matrix)) else "fail"


def lead_text(rows, unjudged: Mapping[int, str] | None = None) -> str:
    """The headline of the demo, on its page and at the end of its terminal output: how many durable agents held
    at every crash point, which could not be judged (and why) and which failed; then the naive agents."""
    unjudged = unjudged or {}
    judged = [m for _, m, _ in rows if m.expect != "observe"]
    naive = [m for _, m, _ in rows if m.expect == "observe"]
    text = f"{sum(m.ok for m in judged)} of {_plural(len(judged), 'durable agent')} held at every crash point"
    loaded = [m for m in judged if not m.ok and unjudged.get(id(m))]
    if loaded:
        text += (f"; {len(loaded)} could not be judged ({', '.join(Path(m.agent).name for m in loaded)}): "
                 f"{unjudged[id(loaded[0])]}")
    failed = [Path(m.agent).name for m in judged if not m.ok and not unjudged.get(id(m))]
    if failed:
        text += f" (FAILED: {', '.join(failed)})"
    if naive:
        shown = sum(tally(m).bad for m in naive)
        text += f"; {shown} of {_plural(len(naive), 'naive agent')} show the failure their lesson fixes"
    return text


def _summary(rows: list[tuple[str, Matrix, str]], unjudged: Mapping[int, str]) -> list[str]:
    head = ("lesson", "agent", "expects", "crash points run", "dupli&shy;cates", "avoidable repeats",
            "un&shy;finished", "verdict")
    numeric = {3, 4, 5, 6}

    def line(tag: str, cells) -> str:
        return "".join(f"<{tag} class='n'>{c}</{tag}>" if k in numeric else f"<{tag}>{c}</{tag}>"
                       for k, c in enumerate(cells))

    out = [f"<table class='summary'><thead><tr>{line('th', head)}</tr></thead><tbody>"]
    for label, matrix, lesson in rows:
        t = tally(matrix)
        agent = (f"<code>{html.escape(Path(matrix.agent).name)}</code> "
                 f"<small>{html.escape(agent_title(label, lesson))}</small>")
        cells = [html.escape(lesson_number(lesson)), agent, f"<b>{html.escape(t.expect)}</b>",
                 f"{t.reached} of {t.points}", t.duplicates, t.avoidable, t.unfinished,
                 html.escape(verdict(matrix, unjudged=unjudged.get(id(matrix))))]
        out.append(f"<tr class='agent {_kind(matrix, unjudged)}'>{line('td', cells)}</tr>")
    out.append("</tbody></table>")
    return out


def _lead(rows, unjudged: Mapping[int, str]) -> str:
    return f"<p class='lead'>{html.escape(lead_text(rows, unjudged))}.</p>"


def _key(labels: Sequence[str]) -> str:
    """The key under the page's heatmaps; ``labels``, every row on the page, say where a repeat is expected."""
    where = " or ".join(f"<code>{form}</code>" for form in expected_repeat_forms(labels))
    hatch = f"repeating-linear-gradient(135deg,{NOT_REACHED} 0 4px,#a0a0a0 4px 5px)"
    swatches = [(FAILURE, "real failure (the number is the count)"),
                (EXPECTED, f"expected: the one repeat at {where} (the answer died in flight)"),
                (hatch, "– crash point never reached"), (CLEAN, "0: clean")]
    spans = "".join(f"<span><i style='background:{c}'></i>{t}</span>" for c, t in swatches)
    return f"<div class='key'><b>Key:</b> {spans}<br><b>Columns:</b> {html.escape(MEASURE_WORDS)}</div>"


def timeline_images(label: str, matrix: Matrix) -> list[str]:
    """The page's timelines of one agent, one ``<img>`` per crash point with runs: the slow part of the page (a
    picture per row), so a caller with matrices still to run can make them in another process meanwhile and hand
    them to :func:`write_report`."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from crashlab.report.plots import timeline

    parts = []
    for row in matrix.rows:
        if row.runs:
            data, _, _ = _png(timeline(row.runs, row.events, title=f"{label}: {row.point}").figure, dpi=80)
            parts.append(f"<img class='timeline' alt='{html.escape(row.point)}' src='data:image/png;base64,{data}'>")
    return parts


def _lesson(lesson: str, members: list[tuple[str, Matrix, str]], timelines: Mapping[int, list[str]],
            unjudged: Mapping[int, str]) -> list[str]:
    """One lesson: its heatmap, then per agent a heading saying what happened, the table and timelines (from
    ``timelines``, by the matrix's ``id``, where they were made already)."""
    number, name = lesson_number(lesson), lesson.replace("_", " ")
    anchor = f" id='lesson-{html.escape(number)}'" if lesson[:2].isdigit() else ""
    parts = [f"<section class='lesson'{anchor}><h2>Lesson {html.escape(name)}</h2>"]
    # An agent file run twice (lesson 10's stream agent, with the naive relay and the addressed one) is told apart by
    # its title's first words: two columns headed alike would read as one agent.
    def title_words(label: str) -> str:  # "10 naive relay: every text delta ..." -> "naive relay"
        words = label.split(":")[0].split(",")[0]
        return words.split(" ", 1)[1] if words[:2].isdigit() and " " in words else words

    names = [short_name(m) for _, m, _ in members]
    names = [n if names.count(n) == 1 else f"{n}: {title_words(label)}" for n, (label, _, _) in zip(names, members)]
    for start in range(0, len(members), AGENTS_PER_IMAGE):  # a lesson with many agents gets several pictures
        matrices = [m for _, m, _ in members[start:start + AGENTS_PER_IMAGE]]
        shown = names[start:start + AGENTS_PER_IMAGE]
        data, width, height = _png(lesson_heatmap(matrices, f"lesson {name}: what each crash point cost", shown))
        alt = f"lesson {name} heatmap: " + ", ".join(shown)
        parts.append(f"<img class='heatmap' alt='{html.escape(alt)}' width='{width}' height='{height}' "
                     f"src='data:image/png;base64,{data}'>")
    for label, matrix, _ in members:
        parts.append(f"<h3 class='agent {_kind(matrix, unjudged)}'><code>{html.escape(Path(matrix.agent).name)}"
                     f"</code>: {html.escape(headline(matrix, unjudged.get(id(matrix))))}</h3><p class='sub'>{html.escape(label)}</p>"
                     f"<pre>{html.escape(str(matrix))}</pre>{screen_table(matrix)}")
        parts.append("<details><summary>timelines, one per crash point</summary>")
        made = timelines.get(id(matrix))
        parts += made if made is not None else timeline_images(label, matrix)
        parts.append("</details>")
    return parts + ["</section>"]


def write_report(path: str | Path, sections: Sequence[tuple], title: str = "Crash matrices",
                 timelines: Mapping[int, list[str]] | None = None, *, force: bool = False,
                 unjudged: Mapping[int, str] | None = None, extra: Sequence[tuple[str, str]] = ()) -> Path:
    """Write the page. ``sections``: ``(label, matrix)`` or ``(label, matrix, lesson)`` in order; sections
    of one lesson share a heatmap (see :func:`sections_with_lessons`). Each heading is written against the
    matrix's own ``expect``: a naive agent's failures are reported as what it shows, not as "clean".
    ``timelines``: :func:`timeline_images` of some of the matrices, made already, by ``id(matrix)``; ``unjudged``:
    by ``id(matrix)``, why a failed matrix could not judge its agent (a machine too loaded); ``extra``: sections after
    the lessons, each a heading and preformatted text (the long agents' rows). Replaces only an
    earlier report page (:mod:`crashlab.plumbing.outputs`), unless ``force``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    rows = sections_with_lessons(sections)
    parts = [REPORT_HEAD, f"<title>{html.escape(title)}</title><style>{_CSS}</style><body>", f"<h1>{html.escape(title)}</h1>"]
    unjudged = unjudged or {}
    if rows:
        parts += [_lead(rows, unjudged), *_summary(rows, unjudged),
                  _key([r.point for row in rows for r in row[1].rows])]
    lessons: dict[str, list] = {}
    for row in rows:
        lessons.setdefault(row[2], []).append(row)
    for lesson, members in lessons.items():
        parts += _lesson(lesson, members, timelines or {}, unjudged)
    parts += [f"<section class='extra'><h2>{html.escape(heading)}</h2><pre>{html.escape(text)}</pre></section>"
              for heading, text in extra]
    path = Path(path)
    write_output(path, "\n".join(parts) + "\n</body></html>\n", REPORT, force=force)
    return path
