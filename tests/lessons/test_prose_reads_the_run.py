"""A sentence about a measured figure is printed by the cell that measured it, never written into the prose.

The lessons that measure (lessons 1, 3, 6, 10 and 11: crash matrices, LangGraph's durability modes, the cost benchmark)
print their claims -- which engine was cheaper, how many steps a recovery ran again, whether every row held -- from
the run's own rows, and their text points at those lines instead of stating figures the learner's table could
contradict. These tests read the executed masters (their stored outputs: nbval re-runs them and compares what is not
timing) and check three things: the text carries no measured figure; each pointer in the text has the line it points
to, printed by a cell above it; and each printed line agrees with the table printed beside it. Lesson 9 (the long
haul) quotes sizes from the field (a 50 MB limit, "99.8 % of the history") that are no run's, so only its pointers and
its growth lines are read here.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
MEASURING = ["01_naive_event_log", "03_langgraph", "06_restate", "10_streaming", "11_side_by_side"]

# A figure that only a run can give -- a time per step, a multiple, a share, "we measured" -- as against a setting
# the text quotes (a 500 ms timeout, a 5 s lease).
MEASURED_FIGURE = re.compile(r"\d+(\.\d+)?\s*ms (per|a|each) step|\d+(\.\d+)?\s*(×|x\b)|\bx the (fsync )?floor"
                             r"|\d+(\.\d+)?\s*% of|\bwe measured\b|\bin our runs\b", re.I)

# (lesson, words of the text that point at a printed line, words of the cell that prints it, the line it prints)
POINTERS = [
    ("01_naive_event_log", "the lines under the table count them on this run", "print(logged.table())",
     r"^decision logged first: a model call repeated at \d+ of \d+ rows"),
    ("03_langgraph", "the line under the table counts this run's", "Where async lost the race",
     r"^async re-ran more than sync at \d+ of 6 crash points on this run"),
    ("06_restate", "the line under the table says whether it was on your run", "print(restate_matrix.table())",
     r"^(every row clean|not clean on this run)"),
    ("10_streaming", "Read the lines above, not a number from this text", "for line in cost_lines(costs",
     r"^dearest on this run: "),
    ("10_streaming", "whether each engine held on this run", "failed = [row.point",
     r"^LangGraph: (every one of the \d+ rows clean|not clean on this run)"),
    ("10_streaming", "the line under its matrix says whether it held on this run", "pai_unclean = [row.point",
     r"^Pydantic AI on Temporal: (every one of the \d+ rows clean|not clean on this run)"),
    ("11_side_by_side", "the lines under it say what it shows", "print(terminal_summary(sections))",
     r"^lesson 7's sagas, the item out of stock: cleanly undone, nothing twice,\n  at every crash point on \d+ of \d+"),
    ("11_side_by_side", "The lines under the benchmark say which way it went on this run",
     "A commit in this process against a round trip", r"^a commit to SQLite in this process \(dbos-sqlite, "),
    ("11_side_by_side", "Read the lines above, not a number from this text", "zombies = zombie_cost(pause=40)",
     r"^extra model calls on this run: "),
    ("11_side_by_side", "the lines under the benchmark count this run's", "What the new process ran again",
     r"^langgraph-async ran (\d+ more step|no more steps)"),
    ("11_side_by_side", "Read the lines above the table, not a count in this text", "def on_screen(row)",
     r"^the addressed relays and streams: the screen exact at every point for \d+ of \d+ agents"),
    ("09_long_haul", "Read the two lines. As shipped", 'probe_world = fresh_world(',
     r"anthropic_supports_on_demand_compaction=True -> "),
    ("09_long_haul", "the largest of each is printed above the plot", 'pai_world = fresh_world(',
     r"^\d+ runs; the largest history "),
    ("09_long_haul", "the last process's own line says how many payloads it read back", 'ext_world = fresh_world(',
     r"^\[store\] this process stored \d+ payloads and read \d+ back"),
    ("09_long_haul", "the lines above say whether the workflow that the wall stopped", 'ext_world = fresh_world(',
     r"^the whole-conversation workflow with the store: (finished|stopped) after \d+ of \d+"),
    ("09_long_haul", "The line under the table says whether every row held on this run", "print(pai_matrix.table())",
     r"^Pydantic AI across its boundary: (every one of the \d+ rows clean|not clean on this run)"),
]


def master(lesson: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def cell_with(nb, words: str, kind: str = "code") -> int:
    found = [i for i, cell in enumerate(nb.cells) if cell.cell_type == kind and words in cell.source]
    assert len(found) == 1, f"expected one {kind} cell with {words!r}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("lesson", MEASURING)
def test_the_text_of_a_measuring_lesson_states_no_measured_figure(lesson):
    for cell in master(lesson).cells:
        if cell.cell_type == "markdown":
            for sentence in re.split(r"(?<=[.!?])\s+", cell.source):
                assert not MEASURED_FIGURE.search(sentence), \
                    f"{lesson}: a measured figure in the text (print it from the cell that measures it): {sentence!r}"


@pytest.mark.parametrize("lesson, pointer, measuring, line", POINTERS,
                         ids=[f"{p[0][:2]}-{p[2][:20]}" for p in POINTERS])
def test_the_text_points_at_a_line_printed_by_the_cell_that_measured(lesson, pointer, measuring, line):
    nb = master(lesson)
    text, code = cell_with(nb, pointer, "markdown"), cell_with(nb, measuring)
    assert code < text, f"{lesson}: the text that reads the line comes before the cell that prints it"
    assert re.search(line, printed(nb.cells[code]), re.M), \
        f"{lesson}: the cell that measures did not print {line!r}:\n{printed(nb.cells[code])[-1500:]}"


def table_rows(text: str, first_column: str) -> dict[str, list[str]]:
    """The rows of a printed table whose header starts with ``first_column``: first cell -> the cells after it
    (columns two or more spaces apart)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_column))
    rows, label = {}, ""
    for line in lines[start + 2:]:
        if not line.strip() or "steps per workflow" in line:
            break
        if line.endswith(" +"):  # a double crash's label too long for its column: ``A +``, then ``  B`` and the cells
            label = line
            continue
        cells = re.split(r"\s{2,}", line.strip())
        rows[f"{label} {cells[0]}" if label else cells[0]] = cells[1:]
        label = ""
    return rows


def test_lesson_11s_lines_agree_with_its_benchmark_table():
    nb = master("11_side_by_side")
    table = table_rows(printed(nb.cells[cell_with(nb, "bench = run_benchmark(")]), "engine")
    said = printed(nb.cells[cell_with(nb, "A commit in this process against a round trip")])
    flat = " ".join(said.split())  # its sentences wrap at words to the notebook's width
    per_step = {engine: float(cells[0].split()[0]) for engine, cells in table.items() if cells[0] != "-"}
    cheaper = re.search(r"on this run (\S+) was the cheaper, (\d+\.\d) x", flat)
    assert cheaper, said
    local, server = per_step["dbos-sqlite"], per_step["restate"]
    assert cheaper.group(1) == ("dbos-sqlite" if local < server else "restate")
    assert float(cheaper.group(2)) == pytest.approx(max(local, server) / min(local, server), abs=0.06)
    rerun = {engine: int(cells[4].split("/")[0]) for engine, cells in table.items()
             if re.fullmatch(r"\d+/\d+", cells[4])}
    for engine, steps in rerun.items():
        assert re.search(rf"^  {re.escape(engine)}\s+{steps}/", said, re.M), f"{engine} ran {steps} again:\n{said}"
    extra = rerun["langgraph-async"] - rerun["langgraph-sync"]
    assert (f"langgraph-async ran {extra} more step(s)" if extra > 0 else "langgraph-async ran no more steps") in flat


def test_lesson_11s_lines_agree_with_its_crash_matrix_summary():
    """And every saga of lesson 7 is in it, Restate's included."""
    nb = master("11_side_by_side")
    out = printed(nb.cells[cell_with(nb, "print(terminal_summary(sections))")])
    agents = {}  # the summary's rows: letter, lesson, agent, expects, points, dup, rep, unf, verdict
    for line in out.splitlines():
        cells = line.split()
        if len(cells) >= 8 and re.fullmatch(r"[A-Z]", cells[0]) and re.fullmatch(r"\d\d", cells[1]):
            agents[cells[2]] = cells
    sagas = {name: cells for name, cells in agents.items() if cells[1] == "07"}
    assert "restate_saga_agent.py" in sagas and len(sagas) == 5, sorted(sagas)
    clean = [name for name, cells in sagas.items() if cells[5:8] == ["0", "0", "0"] and cells[8] == "held"]
    assert f"at every crash point on {len(clean)} of {len(sagas)} back ends" in out, out
    keyed = {name: cells for name, cells in agents.items() if cells[3] == "durable" and cells[1] != "07"}
    held = [name for name, cells in keyed.items() if cells[8] == "held"]
    assert (f"the {len(keyed)} keyed agents of lessons 2 to 8: every one held" in out) == (len(held) == len(keyed)), out
    not_held = re.search(r"not on this run: (.*?) \(its rows above say where\)", " ".join(out.split()))  # wrapped
    assert sorted(re.findall(r"(\S+\.py)", not_held.group(1)) if not_held else []) == \
        sorted(set(keyed) - set(held)), out


def test_lesson_3s_line_agrees_with_its_table_of_modes():
    nb = master("03_langgraph")
    out = printed(nb.cells[cell_with(nb, "Where async lost the race")])
    lost = 0
    for line in out.splitlines():
        found = re.findall(r"dup (\d+) rep (\d+)", line)
        if len(found) == 3:
            _, in_async, in_sync = [(int(d), int(r)) for d, r in found]
            lost += in_async > in_sync
    assert f"async re-ran more than sync at {lost} of 6 crash points on this run" in out, out


def test_lesson_1s_lines_agree_with_its_two_tables():
    nb = master("01_naive_event_log")
    naive = table_rows(printed(nb.cells[cell_with(nb, "print(naive.table())")]), "crash point")
    out = printed(nb.cells[cell_with(nb, "print(logged.table())")])
    logged = table_rows(out, "crash point")
    for name, table in (("naive log", naive), ("decision logged first", logged)):
        repeats = sum(int(cells[3]) > 0 for cells in table.values())
        twice = sum(int(cells[1]) > 0 for cells in table.values())
        assert re.search(rf"^{name}: a model call repeated at {repeats} of {len(table)} rows.*; an effect twice at "
                         rf"{twice}\b", out, re.M), out


def test_lesson_11s_zombie_lines_agree_with_its_rows():
    """The stall's bill: the line that names who paid extra, and the count of orders that held, read the rows above
    them."""
    nb = master("11_side_by_side")
    out = printed(nb.cells[cell_with(nb, "zombies = zombie_cost(pause=40)")])
    # the table's rows: lesson, agent, model calls clean, with the stall, extra, outcome
    rows = re.findall(r"^(\d\d)\s+\S+\s+\d+\s+\d+\s+(\w+)  (.*)$", out, re.M)
    assert len(rows) == 4, out
    paid = [f"lesson {lesson} ({extra})" for lesson, extra, _ in rows if extra not in ("0", "None")]
    said = re.search(r"^extra model calls on this run: (.*)$", out, re.M).group(1)
    assert said == (", ".join(paid) if paid else "none: no attempt was given up on within the pause"), out
    held = sum(outcome == "finished, each effect once" for _, _, outcome in rows)
    assert f"orders finished with each effect once: {held} of {len(rows)}" in out, out


def test_lesson_9s_growth_lines_say_what_its_text_says():
    """The text reads the plot's lines: the continue-as-new totals keep the slope of the linear engines, external
    storage's history grows linearly and its store does not. The stored run must say so, or the text is wrong."""
    nb = master("09_long_haul")
    exponents = {label: float(k) for label, k in
                 re.findall(r"^(.+): exponent (\d+\.\d+)$", printed(nb.cells[cell_with(nb, "fig = growth_plot(")]), re.M)}
    for label in ("Temporal, continue-as-new (all runs)", "Pydantic AI on Temporal, continue-as-new (all runs)",
                  "Temporal, external storage: the history"):
        assert exponents[label] < 1.3, (label, exponents)
    assert exponents["Temporal, external storage: the store"] > 1.6, exponents
    matrix = printed(nb.cells[cell_with(nb, "print(pai_matrix.table())")])
    verdicts = [line.split()[-1] for line in matrix.splitlines()[2:] if re.match(r"(before|after):", line)]
    assert verdicts and ("every one of the" in matrix) == all(v == "ok" for v in verdicts), matrix
