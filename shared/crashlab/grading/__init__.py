"""Authoring and grading: build student notebooks from the masters, grade submissions.

- :mod:`crashlab.grading.build`   -- master (``solutions/``) -> student notebook (``course/``) with
                                     nbgrader's own preprocessors, plus one small one of ours.
- :mod:`crashlab.grading.grade`   -- restore test cells from the master, run the submission in its
                                     own kernel, run the crash matrix on the agent files it wrote,
                                     score, and write Gradescope-shaped JSON.
"""

from crashlab.grading.build import build_course, student_version
from crashlab.grading.grade import GradingError, grade_notebook

__all__ = ["build_course", "student_version", "grade_notebook", "GradingError"]
