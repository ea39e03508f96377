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


def main() -> int:
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from crashlab.course.notebooks import QUIET_KERNEL

    source, cell_timeout, workdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    nb = nbformat.read(source, as_version=4)
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, resources={"metadata": {"path": workdir}},
                            extra_arguments=QUIET_KERNEL)
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
