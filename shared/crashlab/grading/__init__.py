"""Authoring and grading: build student notebooks from the masters, grade submissions.

- :mod:`crashlab.grading.build`        -- master (``solutions/``) -> student notebook (``course/``) with
                                          nbgrader's own preprocessors, plus one small one of ours.
- :mod:`crashlab.grading.grade`        -- the whole grading of one submission, in order.
- :mod:`crashlab.grading.isolation`    -- the sandbox user, the deadline, running the notebook as the student.
- :mod:`crashlab.grading.checks`       -- scoring: the judge's checks and the crash matrices.
- :mod:`crashlab.grading.judge`,
  :mod:`crashlab.grading.proxies`,
  :mod:`crashlab.grading.subject`,
  :mod:`crashlab.grading.remote`       -- the trusted judge, its proxies for the student's code, the untrusted
                                          subject that runs it, and the plain data between.
- :mod:`crashlab.grading.report`       -- the report and the Gradescope-shaped results file.
"""

from __future__ import annotations

import importlib

# Imported on first use, not with the package: the judge and the subject processes (one per check) import
# small modules of this package, and nbformat/nbgrader/nbconvert would cost each of them seconds of CPU.
_LAZY = {"build_course": "crashlab.grading.build", "student_version": "crashlab.grading.build",
         "grade_notebook": "crashlab.grading.grade", "GradingError": "crashlab.grading.report"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
