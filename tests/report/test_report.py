"""The demo report and the demo's terminal summary, from matrices built by hand (no processes, no world):
headings say what happened, every agent is in the summary table, heatmaps fit a 1,024 px page, and the
terminal summary fits in 100 columns."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser

import pytest

from crashlab.world.audit import Event
from crashlab.report.demo import WIDTH, fit, terminal_summary
from crashlab.harness import BASELINE, Matrix, ProcessRun, Row
from crashlab.crash_points import allowed_repeats, default_points
from crashlab.report.plots import EXPECTED, NOT_REACHED
from crashlab.report import CLEAN, PAGE_PX, heatmap_cell, headline, lesson_heatmap, tally, verdict, write_report

POINTS = [BASELINE] + default_points()  # 15 rows, as in the demo


def row(point, dup=0, rep=None, finished=True, reached=True, problems=(), runs=()):
    rep = allowed_repeats(point) if rep is None else rep
    return Row(point, reached, {"charge": 1, "reservation": 1, "confirmation": 1 + dup}, dup, 4 + rep, rep, finished,
               0.5, list(problems), list(runs), [])


def matrix(agent, expect="durable", bad=None):
    bad = bad or {}
    return Matrix(f"/lessons/{agent}", "ORD-8842", expect, [row(p, **bad.get(p, {})) for p in POINTS], 9.0)


NAIVE = {"after:charge_card": {"dup": 1}, "after:reserve_item": {"dup": 1, "rep": 2},
         "after:send_confirmation": {"dup": 1, "rep": 3}, "after:model#3": {"rep": 3}}  # 3 dups, 7 avoidable
FAILING = {"after:reserve_item": {"dup": 1, "problems": ["after:reserve_item: 2 reservations (1 duplicate)"]}}
UNREACHED = {"before:reserve_item": {"reached": False, "problems": ["before:reserve_item: never reached (x)"]}}
AGENTS = [  # (lesson, agent, expect, bad): the demo's nine agents
    ("01_naive_event_log", "naive_agent.py", "observe", NAIVE),
    ("01_naive_event_log", "logged_agent.py", "no-repeats", {"after:charge_card": {"dup": 1}}),
    ("02_idempotent_tools", "uuid_agent.py", "observe", {"after:charge_card": {"dup": 2, "finished": False}}),
    ("02_idempotent_tools", "keyed_agent.py", "durable", {}),
    ("03_langgraph", "two_effects_agent.py", "observe", UNREACHED),
    ("03_langgraph", "order_agent.py", "durable", {}),
    ("04_dbos", "naive_dbos_agent.py", "observe", NAIVE),
    ("04_dbos", "dbos_agent.py", "durable", FAILING),
    ("05_temporal", "temporal_agent.py", "durable", {}),
]


def demo_sections():
    return [(f"{lesson[:2]} {agent} title", matrix(agent, expect, bad), lesson) for lesson, agent, expect, bad in AGENTS]


class Page(HTMLParser):
    """The parts of the page the tests look at: tags with their attributes, and the text under each h3."""

    def __init__(self, text: str):
        super().__init__()
        self.tags, self.h3, self._in_h3 = [], [], False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "h3":
            self._in_h3 = True
            self.h3.append([attrs.get("class", ""), ""])

    def handle_endtag(self, tag):
        self._in_h3 = self._in_h3 and tag != "h3"

    def handle_data(self, data):
        if self._in_h3:
            self.h3[-1][1] += data

    def having(self, tag, cls):
        return [a for t, a in self.tags if t == tag and cls in a.get("class", "").split()]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    sections = demo_sections()
    runs = [ProcessRun(11, -9, 0.0, 1.0, "", ""), ProcessRun(12, 0, 1.0, 2.0, "", "")]
    events = [Event(0.1, 11, "model", "model call 1"), Event(1.1, 12, "model", "model call 1", repeat=True)]
    sections[3][1].rows[2].runs, sections[3][1].rows[2].events = runs, events  # one timeline to draw
    path = write_report(tmp_path_factory.mktemp("report") / "report.html", sections, "demo")
    text = path.read_text()
    return text, Page(text)


# --- headings ------------------------------------------------------------------------------------------

def test_a_naive_agents_heading_counts_its_failures_instead_of_saying_clean():
    naive = matrix("naive_agent.py", "observe", NAIVE)
    text = headline(naive)
    assert text.startswith("3 duplicate effects, 7 avoidable repeats at 15 crash points")
    assert "naive" in text and "clean" not in text
    assert verdict(naive).startswith("naive on purpose")


def test_a_clean_durable_agents_heading_states_the_claim():
    assert headline(matrix("keyed_agent.py")) == "durable: 0 duplicates at 15 crash points"
    assert verdict(matrix("keyed_agent.py"), short=True) == "held"


def test_a_failing_durable_agent_is_called_a_failure():
    text = headline(matrix("dbos_agent.py", "durable", FAILING))
    assert text.startswith("FAILED (durable): 1 duplicate effect, 0 avoidable repeats, 1 problem")


def test_unreached_points_are_not_counted_as_tested():
    t = tally(matrix("two_effects_agent.py", "observe", {**UNREACHED, "after:charge_card": {"dup": 1}}))
    assert (t.points, t.reached, t.duplicates) == (15, 14, 1)
    assert "(1 never reached)" in headline(matrix("x_agent.py", "observe", {**UNREACHED, **NAIVE}))


def test_the_one_repeat_at_after_model_is_not_avoidable():
    t = tally(matrix("keyed_agent.py", "durable", {"after:model#2": {"rep": 2}}))
    assert (t.expected, t.avoidable) == (4, 1)


def test_no_repeats_agents_say_their_duplicates_are_allowed():
    text = headline(matrix("logged_agent.py", "no-repeats", {"after:charge_card": {"dup": 1}}))
    assert text == "no avoidable repeats at 15 crash points; 1 duplicate effect, allowed here"


def test_the_page_headings_say_what_happened(page):
    _, parsed = page
    headings = {text.split(":")[0]: (cls, text) for cls, text in parsed.h3}
    assert len(headings) == len(AGENTS)
    cls, text = headings["naive_agent.py"]
    assert "observe" in cls and "3 duplicate effects" in text and "clean" not in text
    cls, text = headings["keyed_agent.py"]
    assert "ok" in cls and text.endswith("durable: 0 duplicates at 15 crash points")
    cls, text = headings["dbos_agent.py"]
    assert "fail" in cls and "FAILED" in text


# --- the summary table, key and sections -----------------------------------------------------------------

def test_the_summary_table_comes_first_and_has_every_agent(page):
    text, parsed = page
    assert text.index("<table class='summary'") < text.index("<section class='lesson'")
    rows = re.findall(r"<tr class='agent (\w+)'>(.*?)</tr>", text)
    assert len(rows) == len(AGENTS) == len(parsed.having("tr", "agent"))
    for (lesson, agent, expect, _), (kind, cells) in zip(AGENTS, rows):
        assert agent in cells and expect in cells and f"<td>{lesson[:2]}</td>" in cells
        assert kind == ("observe" if expect == "observe" else "fail" if agent == "dbos_agent.py" else "ok")
    naive = rows[0][1]
    assert "15 of 15" in naive and ">3<" in naive and ">7<" in naive and "shows the failure" in naive
    assert "4 of 5 durable agents held" in text and "FAILED: dbos_agent.py" in text


def test_the_page_has_a_key_and_padding_for_a_projector(page):
    text, _ = page
    assert "class='key'" in text and "after:model#N" in text and "never reached" in text
    assert re.search(r"body\{[^}]*padding:\d+px \d+px", text) and "max-width:940px" in text


def test_one_heatmap_per_lesson_as_pngs_that_fit_a_1024_page(page):
    _, parsed = page
    images = parsed.having("img", "heatmap")
    assert [a["alt"].split(" heatmap")[0] for a in images] == [
        "lesson 01 naive event log", "lesson 02 idempotent tools", "lesson 03 langgraph", "lesson 04 dbos",
        "lesson 05 temporal"]
    for attrs in images:
        data = base64.b64decode(attrs["src"].split(",", 1)[1])
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert 400 <= width <= PAGE_PX and (int(attrs["width"]), int(attrs["height"])) == (width, height)
        assert height <= 720, "a lesson's heatmap fits a 768 px high screen"


def test_timelines_stay_folded_away(page):
    text, parsed = page
    assert len(parsed.having("img", "timeline")) == 1
    assert re.search(r"<details><summary>[^<]*</summary>\s*<img class='timeline'", text)


def test_timelines_drawn_elsewhere_make_the_same_page(page, tmp_path):
    """The demo draws each agent's timelines in another process while the other matrices run: a pickled copy of
    the matrix, drawn there, gives the page the very same pictures."""
    import pickle

    from crashlab.report import timeline_images

    text, _ = page
    sections = demo_sections()
    runs = [ProcessRun(11, -9, 0.0, 1.0, "", ""), ProcessRun(12, 0, 1.0, 2.0, "", "")]
    events = [Event(0.1, 11, "model", "model call 1"), Event(1.1, 12, "model", "model call 1", repeat=True)]
    sections[3][1].rows[2].runs, sections[3][1].rows[2].events = runs, events
    label, matrix, _ = sections[3]
    drawn = {id(matrix): timeline_images(label, pickle.loads(pickle.dumps(matrix)))}
    assert write_report(tmp_path / "r.html", sections, "demo", timelines=drawn).read_text() == text


def test_two_tuples_still_work_and_group_by_the_labels_number(tmp_path):
    sections = [("01 naive", matrix("naive_agent.py", "observe", NAIVE)), ("01 logged", matrix("logged_agent.py")),
                ("05 temporal", matrix("temporal_agent.py"))]
    parsed = Page(write_report(tmp_path / "r.html", sections).read_text())
    assert [a["alt"] for a in parsed.having("img", "heatmap")] == [
        "lesson 01 heatmap: naive, logged", "lesson 05 heatmap: temporal"]
    assert [a.get("id") for a in parsed.having("section", "lesson")] == ["lesson-01", "lesson-05"]


def test_a_section_after_the_lessons_shows_its_text_as_it_is(tmp_path):
    """The demo's long-agent rows: a heading and the table's text, escaped, after every lesson's section."""
    text = write_report(tmp_path / "r.html", [("01 naive", matrix("naive_agent.py", "observe", NAIVE))], "demo",
                        extra=[("The long agent: 30 turns", "engine  B/turn@30\nrestate <1.0 KB>")]).read_text()
    assert text.index("<section class='extra'><h2>The long agent: 30 turns</h2>") > text.index("id='lesson-01'")
    assert "restate &lt;1.0 KB&gt;" in text


def test_a_fourth_engine_gets_its_row_and_section_from_the_results_alone(tmp_path):
    """Nothing in the report lists the engines: a Restate agent from the demo's results is a summary row, a
    section and a heatmap like the others, and the terminal summary names it too."""
    sections = demo_sections() + [("08 restate_agent.py title", matrix("restate_agent.py"), "08_restate")]
    text = write_report(tmp_path / "r.html", sections, "demo").read_text()
    parsed = Page(text)
    rows = re.findall(r"<tr class='agent (\w+)'>(.*?)</tr>", text)
    assert len(rows) == len(AGENTS) + 1 and rows[-1][0] == "ok" and "restate_agent.py" in rows[-1][1]
    assert "<td>08</td>" in rows[-1][1]
    assert parsed.having("section", "lesson")[-1].get("id") == "lesson-08"
    assert parsed.having("img", "heatmap")[-1]["alt"].startswith("lesson 08 restate heatmap")
    assert "restate_agent.py" in parsed.h3[-1][1] and "durable: 0 duplicates" in parsed.h3[-1][1]
    assert "restate" in terminal_summary(sections)


# --- the heatmap itself ----------------------------------------------------------------------------------

def test_heatmap_cells_tell_failures_from_the_expected_repeat_and_unreached_points():
    m = matrix("x_agent.py", "observe", {**UNREACHED, **NAIVE})
    by_point = {r.point: r for r in m.rows}
    assert heatmap_cell(by_point["after:model#1"], "rep") == (EXPECTED, "1")
    assert heatmap_cell(by_point["before:reserve_item"], "dup") == (NOT_REACHED, "–")
    assert heatmap_cell(by_point["before:model#1"], "dup") == (CLEAN, "0")
    colour, text = heatmap_cell(by_point["after:model#3"], "rep")  # 3 repeats: 2 beyond the expected one
    assert text == "3" and colour not in (EXPECTED, CLEAN, NOT_REACHED)


def _boxes(texts, renderer):
    return [t.get_window_extent(renderer) for t in texts if t.get_text() and t.get_visible()]


def _overlap(boxes):
    return any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])


def test_heatmap_numbers_are_large_and_labels_do_not_overlap():
    import matplotlib.pyplot as plt

    fig = lesson_heatmap([matrix("naive_dbos_agent.py", "observe", NAIVE), matrix("two_effects_agent.py")], "t")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        numbers = [t for t in ax.texts if t.get_text().isdigit()]
        assert len(numbers) == 2 * 3 * len(POINTS)
        assert min(b.height for b in _boxes(numbers, renderer)) >= 14  # the digit itself is ~13 px of that
        assert not _overlap(_boxes(ax.get_yticklabels(), renderer))
        assert not _overlap(_boxes(ax.get_xticklabels(), renderer))
        names = [t for t in ax.texts if not t.get_text().isdigit() and t.get_text() != "–"]
        assert [t.get_text() for t in names] == ["naive_dbos", "two_effects"] and not _overlap(_boxes(names, renderer))
    finally:
        plt.close(fig)


# --- the terminal ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("copies", [1, 4])
def test_the_terminal_summary_fits_in_95_columns(copies):
    sections = demo_sections() * copies  # 9 and 36 agents
    text = terminal_summary(sections)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH == 95
    for _, m, _ in sections[:9]:
        assert m.agent.rsplit("/", 1)[1] in text
    assert re.search(r"^A\s+01\s+naive_agent\.py\s+observe\s+15/15\s+3\s+7\s+0\s+shows the failure$", text, re.M)
    assert re.search(r"^H\s+04\s+dbos_agent\.py\s+durable\s+15/15\s+1\s+0\s+0\s+FAILED: 1 problem$", text, re.M)
    grid = [line for line in lines if line.startswith("after:model#3")]
    assert sum(len(line.split()) - 1 for line in grid) == len(sections)  # one cell per agent, over the blocks
    assert len(grid) == 1 if copies == 1 else len(grid) > 1  # 9 agents fit one block; 36 take several
    assert "0/3/0!" in grid[0] and "0/1*/0" in grid[0]
    assert [line for line in lines if line.startswith("before:reserve_item")][0].split()[5] == "-"


def test_fit_wraps_only_long_lines():
    long = "x " * 80
    table = "a    b  \n  (no crash)  0"
    assert fit(table) == table and fit("short\n" + long).splitlines()[0] == "short"
    assert all(len(line) <= 100 for line in fit(long).splitlines()) and len(fit(long).splitlines()) == 2


def test_the_page_replaces_only_an_earlier_page(tmp_path):
    """The demo writes crashlab-demo.html where it runs: over its own earlier page, never over a file of the
    learner's of that name, unless forced."""
    from crashlab.plumbing.outputs import OutputError

    sections = [("01 logged", matrix("logged_agent.py"))]
    page = write_report(tmp_path / "crashlab-demo.html", sections)
    assert write_report(page, sections) == page  # an earlier page of its own: replaced
    notes = tmp_path / "notes.html"
    notes.write_text("<html><body>my notes</body></html>\n")
    with pytest.raises(OutputError, match="never replaced"):
        write_report(notes, sections)
    assert "my notes" in notes.read_text()
    write_report(notes, sections, force=True)
    assert "my notes" not in notes.read_text()
