"""Authoring and grading: build student notebooks from the masters, grade submissions.

- :mod:`crashlab.grading.build`        -- master (``solutions/``) -> student notebook (``course/``) with
                                          nbgrader's own preprocessors, plus one small one of ours.
- :mod:`crashlab.grading.grade`        -- the whole grading of one submission, in order.
- :mod:`crashlab.grading.isolation`    -- the sandbox user, the deadline, running the notebook as the student.
- :mod:`crashlab.grading.checks`       -- scoring: the judge's checks and the crash matrices.
- :mod:`crashlab.grading.judge`,
  :mod:`crashlab.grading.subject`,
  :mod:`crashlab.grading.remote`       -- the trusted judge, the untrusted subject, and the plain data between.
- :mod:`crashlab.grading.report`       -- the report and the Gradescope-shaped results file.
"""

from crashlab.grading.build import build_course, student_version
from crashlab.grading.grade import GradingError, grade_notebook

__all__ = ["build_course", "student_version", "grade_notebook", "GradingError"]
