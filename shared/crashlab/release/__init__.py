"""Handing the course to a graded class: what students get, and what stays the instructor's.

- :mod:`crashlab.release.student` -- ``crashlab release OUT_DIR``: the student repository, with no masters,
  no hidden checks and no lesson answers, a learner's Makefile (``make check`` self-checks without masters)
  and a GitHub Classroom workflow that fetches the private grading bundle at grading time.
- :mod:`crashlab.release.bundle`  -- ``crashlab autograder OUT.zip``: that private bundle, which is also a
  Gradescope autograder (``setup.sh``, ``run_autograder``; :mod:`crashlab.grading.gradescope` grades).
- :mod:`crashlab.release.files`   -- which files of the repository each carries; the templates.
"""
