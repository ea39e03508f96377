"""Progress on a wait: a bar whose clock keeps moving between its steps, and a stage that has said nothing for a few
seconds saying it is still going.

A progress bar moves when a step ends; a crash-matrix row on Temporal, or a benchmark's recovery scene, can take
half a minute on a loaded machine, and a bar that has not moved for that long looks like a hung command.
:func:`keep_ticking` redraws a bar every second, so its elapsed time runs on (in a notebook, the widget's). A grading
prints a line per stage; :class:`Ticker` adds one after :data:`FIRST_S` seconds of a stage's silence, then one every
:data:`EVERY_S`, naming the stage and how long it has taken.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

FIRST_S = 5.0
EVERY_S = 10.0


def watched(bar) -> bool:
    """True when someone watches ``bar`` as it moves: a notebook's widget, or a terminal. A log file (a CI job's)
    gets each redraw as more text."""
    if hasattr(bar, "container"):  # tqdm.notebook's widget
        return True
    with contextlib.suppress(Exception):
        return bool(bar.fp.isatty())
    return False


def start_ticking(bar, every: float | None = None) -> Callable[[], None]:
    """Redraw ``bar`` (a tqdm bar, or None: nothing to do) every ``every`` seconds (by default each second where it is
    watched, each ten in a log) until the function this returns is called."""
    if bar is None:
        return lambda: None
    every = every or (1.0 if watched(bar) else 10.0)
    done = threading.Event()

    def tick() -> None:
        while not done.wait(every):
            with contextlib.suppress(Exception):  # a bar closed under us, a widget gone: the work goes on
                bar.refresh()

    thread = threading.Thread(target=tick, name="progress-tick", daemon=True)
    thread.start()

    def stop() -> None:
        done.set()
        thread.join(timeout=2 * every)
    return stop


@contextlib.contextmanager
def keep_ticking(bar, every: float | None = None) -> Iterator[None]:
    """:func:`start_ticking` for the length of a block."""
    stop = start_ticking(bar, every)
    try:
        yield
    finally:
        stop()


class Ticker:
    """Says ``… still STAGE (N s)`` through ``say`` once a stage has been silent for ``first`` seconds, then every
    ``every`` seconds, until the next stage or line. Use as a context manager (or :meth:`start` and :meth:`stop`);
    :meth:`stage` names what is running (and says it, unless ``quiet``), :meth:`said` tells it that something else
    was just said."""

    def __init__(self, say: Callable[[str], None], first: float = FIRST_S, every: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.say, self.first, self.every, self.clock = say, first, every, clock
        self.lock = threading.Lock()
        self.what: str | None = None
        self.since = self.last = clock()
        self.next = self.first
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> "Ticker":
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="progress-ticker", daemon=True)
            self.thread.start()
        return self

    def stop(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(timeout=5)

    def __enter__(self) -> "Ticker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stage(self, what: str | None, quiet: bool = False) -> None:
        """Name what runs now (None: nothing to say; a progress bar of its own shows it) and, unless ``quiet``, say it.
        A quiet stage inherits the silence so far: its first "still" line comes when the last one's would have."""
        with self.lock:
            self.what, self.since = what, self.clock()
        if what is not None and not quiet:
            self.say(what)
            self.said()

    def said(self) -> None:
        with self.lock:
            self.last, self.next = self.clock(), self.first

    def tick(self) -> None:
        """Say the stage is still going, if it has been silent long enough (the thread calls this four times a
        second)."""
        with self.lock:
            now = self.clock()
            if self.what is None or now - self.last < self.next:
                return
            line = f"… still {self.what} ({now - self.since:.0f} s)"
        with contextlib.suppress(Exception):  # not under the lock: say() may tell said()
            self.say(line)
        with self.lock:  # after it: its own line is no reason to wait less for the next one
            self.last, self.next = now, self.every

    def _run(self) -> None:
        while not self.done.wait(0.25):
            self.tick()
