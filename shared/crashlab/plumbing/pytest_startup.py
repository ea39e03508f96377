"""The course's own test runs load this first (pyproject's ``addopts``: ``-p crashlab.plumbing.pytest_startup``).

pytest imports a plugin named with ``-p`` before the plugins installed beside it, and nbval, one of those, reads
notebooks with nbformat on import: so this is the one place early enough to keep ``rfc3987_syntax`` out of the
runner and each of its workers (see :mod:`crashlab.plumbing.startup`, about 0.7 s of CPU a process)."""

from crashlab.plumbing.startup import skip_unused_slow_imports

skip_unused_slow_imports()
