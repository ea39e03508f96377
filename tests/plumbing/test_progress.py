"""Progress on a wait (crashlab.plumbing.progress): a grading stage that says it is still going, a bar that redraws."""

from __future__ import annotations

import threading

from crashlab.plumbing.progress import Ticker, keep_ticking


def test_a_silent_stage_says_it_is_still_going_first_after_a_few_seconds_then_less_often():
    now = [100.0]
    said: list[str] = []
    ticker = Ticker(lambda line: (said.append(line), ticker.said()), first=5, every=10, clock=lambda: now[0])

    def at(t: float) -> list[str]:
        now[0] = 100.0 + t
        ticker.tick()
        return said[-1:]

    ticker.stage("judging your answers")
    assert said == ["judging your answers"]
    assert at(4.9) == ["judging your answers"]
    ticker.stage("judging ex1_checks", quiet=True)  # named, not said: the silence since the last line counts
    assert at(5.0) == ["… still judging ex1_checks (0 s)"]
    assert at(14.0) == ["… still judging ex1_checks (0 s)"] and at(15.0) == ["… still judging ex1_checks (10 s)"]
    ticker.said()  # a result was said: the silence starts again
    assert at(19.0)[0].endswith("(10 s)") and at(20.0) == ["… still judging ex1_checks (15 s)"]
    ticker.stage(None, quiet=True)  # a progress bar of its own shows it: nothing to say
    assert at(100.0) == ["… still judging ex1_checks (15 s)"] and len(said) == 4


class Bar:
    def __init__(self):
        self.redrawn = threading.Event()
        self.refresh = self.redrawn.set


def test_a_bar_is_redrawn_while_its_work_runs_and_not_after():
    bar = Bar()
    with keep_ticking(bar, every=0.05):
        assert bar.redrawn.wait(30), "the bar was never redrawn"
    bar.redrawn.clear()
    assert not bar.redrawn.wait(0.3), "redrawn after the block"
    with keep_ticking(None):  # no bar: nothing to do
        pass
