"""Run a submitted notebook in a kernel, as the student: ``python -m crashlab.grading.run_notebook NB CELL_TIMEOUT DIR
[EXECUTED]`` (EXECUTED: where to save the notebook with its outputs, for the learner's self-check).

Started by the grader in a process of its own (as the sandbox user while grading as root), so the
kernel and everything the notebook starts can be killed together at the deadline. What it produces --
the files the notebook writes -- is untrusted data; no point is awarded from the run itself.
"""

from __future__ import annotations

if __name__ == "__main__":  # the grader's own process: nothing here checks "iri" strings (crashlab.plumbing.startup)
    from crashlab.plumbing.startup import skip_unused_slow_imports

    skip_unused_slow_imports()

import sys

import nbformat

from crashlab.plumbing.tracebacks import cut_at_word

CELL_MARK = "CELL "  # a line "CELL i/n" on stderr as the kernel starts cell i of n: the grader shows its progress


def client_class():
    """nbclient's client, with a per-cell timeout that holds. At the timeout it interrupts the kernel, and then
    waits for the cell as long again; a cell that catches the interrupt (``except BaseException``) would run on
    until the grading's deadline. So at the second timeout of one cell its kernel is killed, and the notebook
    stops there with a CellTimeoutError."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError
    from nbclient.util import ensure_async

    class TimeoutHolds(NotebookClient):
        async def _async_handle_timeout(self, timeout, cell=None):
            interrupted = self.__dict__.setdefault("_interrupted", set())
            if cell is None or id(cell) not in interrupted:
                interrupted.add(id(cell))
                return await super()._async_handle_timeout(timeout, cell)
            await ensure_async(self.km.shutdown_kernel(now=True))
            raise CellTimeoutError.error_from_timeout_and_cell(
                "Cell execution timed out and went on after the interrupt, so its kernel was stopped", timeout, cell)
    return TimeoutHolds


def main() -> int:
    from nbclient.exceptions import DeadKernelError

    from crashlab.course.notebooks import QUIET_KERNEL

    source, cell_timeout, workdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    nb = nbformat.read(source, as_version=4)
    client = client_class()(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, resources={"metadata": {"path": workdir}},
                            extra_arguments=QUIET_KERNEL)
    client.on_cell_start = lambda cell, cell_index: print(f"{CELL_MARK}{cell_index + 1}/{len(nb.cells)}",
                                                           file=sys.stderr, flush=True)
    status = 0
    try:
        client.execute(cwd=workdir)
    except DeadKernelError:
        print("the kernel died while running the notebook; cells after that point were not run", file=sys.stderr)
        status = 3
    except Exception as exc:  # noqa: BLE001 -- a kernel that would not start, a timeout it could not interrupt
        print(f"the notebook did not run to the end ({type(exc).__name__}: {cut_at_word(str(exc), 200)})", file=sys.stderr)
        status = 3
    if len(sys.argv) > 4:
        nbformat.write(nb, sys.argv[4])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
