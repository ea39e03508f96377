"""A pytest plugin: a master's cell that waits a long time without a word fails, in the nbval run of the masters.

A learner who runs a cell and sees nothing for half a minute cannot tell a slow machine from a hung cell, so every
wait over a few seconds shows progress (a bar, a line per step). This plugin holds the masters to it where they
already run in the suite -- nbval's Run All of each master -- at no extra cost: it reads the kernel messages nbval
receives for each cell and measures the longest stretch between the cell's start, each of its outputs (a print, a
figure, a progress bar's update) and its end, from the kernel's own timestamps.

A loaded machine stretches every wait, and the suite must pass on a machine loaded to 20 by other work. So a stretch
is judged at quiet-machine speed: its wall time divided by how much slower than quiet the machine ran meanwhile,
measured in the same run -- every second a thread here burns 5 ms of CPU and times how much wall time that took
(on a quiet machine, 5 ms; with the cores shared among ten runnable processes, about ten times that). A stretch
that is still over :data:`LIMIT_S` at quiet speed is a silence, and the cell fails saying how long and where. The
scaling is lenient (a wait spent sleeping does not stretch with the load, yet is scaled down as if it did): on a
loaded machine a silence can pass unseen, never the reverse; a quiet run sees it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

import pytest

LIMIT_S = float(os.environ.get("CRASHLAB_SILENCE_LIMIT_S", "10"))  # at quiet speed; its own test cuts it
REPORT_ENV = "CRASHLAB_SILENCE_REPORT"  # a file: one JSON line per cell run, its longest silence (for measuring)
SAMPLE_EVERY_S = 1.0
SPIN_CPU_S = 0.005
# What a learner sees move: outputs, and updates of a widget (a progress bar in the notebook).
SEEN = {"stream", "display_data", "update_display_data", "execute_result", "error", "clear_output", "comm_msg",
        "comm_open"}


def message_time(msg: dict) -> float | None:
    date = msg.get("header", {}).get("date")
    if isinstance(date, str):
        try:
            date = datetime.fromisoformat(date.replace("Z", "+00:00"))
        except ValueError:
            return None
    return date.timestamp() if isinstance(date, datetime) else None


class Slowdown:
    """How many times slower than quiet this machine runs, sampled every second from a thread of this process."""

    def __init__(self, every: float = SAMPLE_EVERY_S, spin: float = SPIN_CPU_S):
        self.every, self.spin = every, spin
        self.samples: list[tuple[float, float]] = []  # (time.time(), factor)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="slowdown-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def sample(self) -> float:
        wall, cpu = time.monotonic(), time.thread_time()
        while time.thread_time() - cpu < self.spin:
            pass
        factor = max(1.0, (time.monotonic() - wall) / max(time.thread_time() - cpu, 1e-9))
        self.samples.append((time.time(), factor))
        del self.samples[:-3600]  # the last hour is plenty for any cell
        return factor

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def between(self, start: float, end: float) -> float:
        """The machine's mean slowdown from ``start`` to ``end`` (1.0 with no sample near)."""
        near = [f for t, f in self.samples if start - self.every <= t <= end + self.every]
        return sum(near) / len(near) if near else 1.0


@dataclass
class Silence:
    seconds: float  # wall time
    quiet_seconds: float  # at quiet-machine speed
    slowdown: float
    after: str  # what came last before it: "the cell's start" or the output's kind

    def words(self) -> str:
        return (f"no output for {self.seconds:.1f} s after {self.after} ({self.quiet_seconds:.1f} s at quiet-machine "
                f"speed: the machine ran {self.slowdown:.1f}x slower than quiet meanwhile); a wait this long must "
                f"show progress (a progress bar, or a line per step)")


def longest_silence(times: list[tuple[float, str]], slowdown: Slowdown | None) -> Silence | None:
    """The longest stretch between consecutive moments of ``times`` -- (time, what) from the cell's start, through
    its outputs, to its end -- judged at quiet speed."""
    worst = None
    for (start, what), (end, _) in zip(times, times[1:]):
        factor = slowdown.between(start, end) if slowdown else 1.0
        gap = Silence(end - start, (end - start) / factor, factor, what)
        if worst is None or gap.quiet_seconds > worst.quiet_seconds:
            worst = gap
    return worst


@dataclass
class CellWatch:
    msg_id: str | None = None
    moments: list[tuple[float, str]] = field(default_factory=list)
    ended: bool = False


class SilentWaits:
    """Registered once per pytest process; does nothing until nbval runs a cell."""

    def __init__(self, limit: float = LIMIT_S):
        self.limit = limit
        self.slowdown = Slowdown()
        self.cell = CellWatch()
        self.patched = False

    def _patch_nbval(self) -> None:
        from nbval.kernel import RunningKernel

        plugin, execute, get_message = self, RunningKernel.execute_cell_input, RunningKernel.get_message

        def execute_cell_input(kernel, *args, **kwargs):
            msg_id = execute(kernel, *args, **kwargs)
            plugin.cell.msg_id = msg_id
            return msg_id

        def get_msg(kernel, stream, timeout=None):
            msg = get_message(kernel, stream, timeout)
            if stream == "iopub":
                plugin.heard(msg)
            return msg

        RunningKernel.execute_cell_input, RunningKernel.get_message = execute_cell_input, get_msg
        self.patched = True

    def heard(self, msg: dict) -> None:
        cell = self.cell
        if cell.msg_id is None or cell.ended or msg.get("parent_header", {}).get("msg_id") != cell.msg_id:
            return
        at, kind = message_time(msg), msg.get("msg_type", "")
        if at is None:
            return
        if kind == "status" and msg.get("content", {}).get("execution_state") == "idle":
            cell.moments.append((at, "end"))
            cell.ended = True
        elif kind == "execute_input" and not cell.moments:
            cell.moments.append((at, "the cell's start"))
        elif kind in SEEN and cell.moments:
            cell.moments.append((at, f"its last output ({kind})"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        if type(item).__name__ != "IPyNbCell":
            return (yield)
        if not self.patched:
            self._patch_nbval()
        self.slowdown.start()
        self.cell = CellWatch()
        result = yield  # nbval's own failure (an error, outputs that differ) is reported as it is
        cell = self.cell
        if cell.ended and len(cell.moments) >= 2:
            silence = longest_silence(cell.moments, self.slowdown)
            if silence is not None and os.environ.get(REPORT_ENV):
                with open(os.environ[REPORT_ENV], "a") as report:
                    report.write(json.dumps({"cell": item.nodeid, "seconds": round(silence.seconds, 2),
                                             "quiet_seconds": round(silence.quiet_seconds, 2),
                                             "slowdown": round(silence.slowdown, 2), "after": silence.after,
                                             "cell_seconds": round(cell.moments[-1][0] - cell.moments[0][0], 2)})
                                 + "\n")
            if silence is not None and silence.quiet_seconds > self.limit:
                pytest.fail(f"a silent wait: {silence.words()}", pytrace=False)
        return result

    def pytest_unconfigure(self, config):
        self.slowdown.stop()


def pytest_configure(config):
    """``-p silent_waits`` (with ``tests/`` on the path) for a run that does not load tests/conftest.py: nbval of
    one master, say."""
    register(config)


def register(config) -> None:
    """Register the plugin for this pytest process (a conftest's ``pytest_configure`` calls it)."""
    if not config.pluginmanager.has_plugin("crashlab-silent-waits"):
        config.pluginmanager.register(SilentWaits(), "crashlab-silent-waits")
