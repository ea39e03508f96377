"""The silent-wait check of the masters (tests/silent_waits.py): what it measures, and that it fails a cell."""

from __future__ import annotations

import json

import nbformat
import pytest

from silent_waits import Silence, SilentWaits, Slowdown, longest_silence


class Steady(Slowdown):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def between(self, start: float, end: float) -> float:
        return self.factor


def test_the_longest_stretch_is_judged_at_quiet_speed():
    moments = [(100.0, "the cell's start"), (101.0, "its last output (stream)"), (113.0, "its last output (stream)"),
               (114.0, "end")]
    quiet = longest_silence(moments, Steady(1.0))
    assert (quiet.seconds, quiet.quiet_seconds, quiet.after) == (12.0, 12.0, "its last output (stream)")
    loaded = longest_silence(moments, Steady(3.0))  # the same cell on a machine three times slower than quiet
    assert (loaded.seconds, loaded.quiet_seconds) == (12.0, 4.0)
    assert "12.0 s after its last output (stream) (4.0 s at quiet-machine speed" in loaded.words()
    assert longest_silence([(5.0, "the cell's start"), (5.5, "end")], None) == Silence(0.5, 0.5, 1.0,
                                                                                           "the cell's start")


def test_the_slowdown_is_measured_and_never_below_one():
    slowdown = Slowdown()
    factors = [slowdown.sample() for _ in range(3)]
    assert all(f >= 1.0 for f in factors) and len(slowdown.samples) == 3
    start, end = slowdown.samples[0][0], slowdown.samples[-1][0]
    assert slowdown.between(start, end) == sum(factors) / 3
    assert slowdown.between(end + 60, end + 70) == 1.0  # nothing sampled near: taken as quiet


def test_a_master_cell_silent_too_long_fails_and_each_cell_is_measured_from_the_kernel(tmp_path, monkeypatch, capsys):
    """nbval over a small notebook with the plugin, its limit cut to nothing: every cell fails, saying why; the
    report gives the silence a sleeping cell had (at least its sleep) and one a printing cell had (between its
    outputs: shorter than the cell). Each print is flushed before the next sleep, so the printing cell's outputs
    are spread over it however slowly the kernel's threads are scheduled: no check compares two wall-clock spans."""
    cells = ["import time\ntime.sleep(1.5)",
             "import time\nfor _ in range(6):\n    print('.', flush=True)\n    time.sleep(0.25)"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    path = tmp_path / "silent.ipynb"
    nbformat.write(nb, path)
    report = tmp_path / "silences.jsonl"
    monkeypatch.setenv("CRASHLAB_SILENCE_REPORT", str(report))
    monkeypatch.chdir(tmp_path)
    plugin = SilentWaits(limit=0.000001)
    from nbval.kernel import RunningKernel

    before = (RunningKernel.execute_cell_input, RunningKernel.get_message)  # this process's own nbval run's, if any
    # in this process (pytester's way): the plugin and nbval are imported already, no second interpreter to start
    code = pytest.main(["-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", "--nbval-lax", "--rootdir",
                        str(tmp_path), str(path), "-q", "-o", "addopts="], plugins=[plugin])
    out = capsys.readouterr().out
    assert (RunningKernel.execute_cell_input, RunningKernel.get_message) == before, "the run left its wrappers on nbval"
    assert code == pytest.ExitCode.TESTS_FAILED, out
    # one failure section per cell; the short summary may repeat the message or cut it, as the terminal's width says
    sections = [line for line in out.splitlines() if line.startswith("pytest plugin exception: a silent wait: no output for")]
    assert len(sections) == 2, out
    sleeping, printing = [json.loads(line) for line in report.read_text().splitlines()]
    assert sleeping["seconds"] >= 1.5 and sleeping["after"] == "the cell's start", sleeping
    assert printing["seconds"] < printing["cell_seconds"] and printing["cell_seconds"] >= 1.5, printing
