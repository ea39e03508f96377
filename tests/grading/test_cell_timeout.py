"""The per-cell timeout of a graded run holds against a cell that catches the interrupt it sends."""

import subprocess
import sys

import nbformat


def test_a_cell_that_catches_the_interrupt_is_stopped_at_its_second_timeout(tmp_path):
    """The first timeout interrupts the kernel; this cell catches KeyboardInterrupt as a BaseException and goes
    on, so at the second its kernel is killed, and the notebook stops there (before, only the deadline ended it)."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
                                  "    except BaseException:\n        pass"),
        nbformat.v4.new_code_cell("open('after.txt', 'w').write('ran')"),
    ])
    source = tmp_path / "stubborn.ipynb"
    nbformat.write(nb, source)
    done = subprocess.run([sys.executable, "-m", "crashlab.grading.run_notebook", str(source), "2", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-1500:]
    assert "went on after the interrupt" in done.stderr, done.stderr[-1500:]
    assert not (tmp_path / "after.txt").exists()
