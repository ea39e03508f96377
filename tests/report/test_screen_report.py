"""The demo page's screen verdicts, from matrices built by hand (no processes, no world): an agent that streams gets
a table of what the user's screen showed at each crash point, a problem on the screen is named there and counted in
the heading and summary (a naive relay's included, though its matrix judges nothing), and a clean screen says clean."""

from __future__ import annotations

import re

from crashlab.harness import BASELINE, Matrix, Row
from crashlab.report import headline, tally, verdict, write_report
from crashlab.world.screen_audit import ScreenAudit

POINTS = [BASELINE, "mid:model#1@chunk2", "mid:model#4@chunk6"]


def screen(**found) -> ScreenAudit:
    return ScreenAudit("ORD-8842", "Charging the card.", "Charging the card.", shows=12, **found)


def row(point, screen_audit, problems=()) -> Row:
    return Row(point, True, {"charge": 1, "reservation": 1, "confirmation": 1}, 0, 4, 0, True, 0.5, list(problems),
               [], [], screen=screen_audit)


def streaming(agent, expect, bad: dict[str, ScreenAudit]) -> Matrix:
    rows = [row(p, bad.get(p, screen(retractions=int(p != BASELINE))),
                [f"{p}: on the user's screen, x"] if p in bad and expect != "observe" else []) for p in POINTS]
    return Matrix(f"/lessons/{agent}", "ORD-8842", expect, rows, 3.0)


TWICE = {"mid:model#4@chunk6": screen(shown_twice=['"Charging the card."'])}


def page(tmp_path, *matrices) -> str:
    sections = [(f"10 {m.agent} title", m, "10_streaming") for m in matrices]
    return write_report(tmp_path / "report.html", sections, "demo").read_text()


def screen_rows(text: str, agent: str) -> list[tuple[str, str]]:
    """(class, row's text) of each crash point in ``agent``'s screen table."""
    section = text.split(f"<code>{agent}</code>:", 1)[1]
    table = re.search(r"<table class='screen'>.*?</table>", section).group(0)
    return [(cls, re.sub(r"<[^>]+>", " ", cells)) for cls, cells in re.findall(r"<tr class='point (\w+)'>(.*?)</tr>",
                                                                                 table)]


def test_a_clean_screen_says_clean_at_every_point(tmp_path):
    clean = streaming("relay_agent.py", "durable", {})
    text = page(tmp_path, clean)
    rows = screen_rows(text, "relay_agent.py")
    assert [cls for cls, _ in rows] == ["clean"] * 3
    assert all(cells.split()[-1] == "clean" for _, cells in rows)
    assert "1 (1)" in rows[1][1]  # the one retraction allowed where the user watched a stream die
    assert tally(clean).screen == 0 and headline(clean) == "durable: 0 duplicates, the screen clean at 3 crash points"


def test_text_shown_twice_is_named_at_its_point_for_a_durable_agent(tmp_path):
    failing = streaming("relay_agent.py", "durable", TWICE)
    rows = screen_rows(page(tmp_path, failing), "relay_agent.py")
    assert [cls for cls, _ in rows] == ["clean", "clean", "wrong"]
    assert 'FAILED: shown twice: "Charging the card."' in rows[2][1].replace("&quot;", '"')
    assert tally(failing).screen == 1 and "avoidable repeats, 1 screen wrong, 1 problem at 3" in headline(failing)


def test_a_naive_relays_screen_shows_the_failure_though_its_matrix_judges_nothing(tmp_path):
    naive = streaming("naive_relay_agent.py", "observe", {
        "mid:model#1@chunk2": screen(lost=['"the card."'], retractions=0),
        "mid:model#4@chunk6": screen(never_recorded=['"Charging"'], retractions=3)})
    assert naive.ok  # observed, not judged: the screen's verdict is the page's
    text = page(tmp_path, naive)
    rows = screen_rows(text, "naive_relay_agent.py")
    assert [cls for cls, _ in rows] == ["clean", "wrong", "wrong"]
    assert "what the naive relay does: lost" in rows[1][1]
    assert "3 (1)" in rows[2][1] and "never recorded" in rows[2][1] and "(+1 more)" in rows[2][1]
    assert verdict(naive) == "naive on purpose: shows the failure"
    assert "0 avoidable repeats, 2 screens wrong at 3 crash points" in headline(naive) and "clean" not in headline(naive)


def test_an_agent_that_shows_nothing_gets_no_screen_table(tmp_path):
    quiet = Matrix("/lessons/keyed_agent.py", "ORD-8842", "durable",
                   [Row(p, True, {}, 0, 4, 0, True, 0.5) for p in POINTS], 3.0)
    assert "table class='screen'" not in page(tmp_path, quiet) and tally(quiet).screen == 0


def test_one_agent_file_run_twice_gets_two_names_in_its_lessons_heatmap(tmp_path):
    """Lesson 10 runs stream_agent.py with the naive relay and with the addressed one: two columns headed alike would
    read as one agent, so each is told apart by its title's first words."""
    naive, addressed = streaming("stream_agent.py", "observe", TWICE), streaming("stream_agent.py", "durable", {})
    sections = [("10 naive relay: every text delta shown as it arrives", naive, "10_streaming"),
                ("10 log agent, relay addressed by turn", addressed, "10_streaming")]
    text = write_report(tmp_path / "report.html", sections, "demo").read_text()
    [alt] = re.findall(r"<img class='heatmap' alt='([^']*)'", text)
    assert alt == "lesson 10 streaming heatmap: stream: naive relay, stream: log agent", alt


def test_the_key_names_the_point_where_a_streamed_answer_died_once_a_row_has_one(tmp_path):
    """The orange cell of a mid-stream row is the one repeat allowed there: a key that named only after:model#N
    would leave it unexplained. The key names what the figure's rows have, no more."""
    import matplotlib.pyplot as plt

    from crashlab.report.plots import lesson_heatmap

    def key_texts(matrices) -> str:
        fig = lesson_heatmap(matrices, "t")
        try:
            return " ".join(t.get_text() for legend in fig.legends for t in legend.get_texts())
        finally:
            plt.close(fig)

    streamed = streaming("relay_agent.py", "durable", {})
    plain = Matrix("/lessons/log_agent.py", "ORD-8842", "durable",
                   [row(p, None) for p in (BASELINE, "after:model#1", "before:charge_card")], 3.0)
    assert "mid:model#N@chunkK" in key_texts([streamed]) and "mid:model" not in key_texts([plain])
    assert "after:model#N" in key_texts([plain])
    assert "<code>mid:model#N@chunkK</code>" in page(tmp_path, streamed)
    assert "mid:model" not in write_report(tmp_path / "plain.html", [("01 log", plain, "01")], "demo").read_text() \
        .split("class='key'", 1)[1].split("</div>", 1)[0]
