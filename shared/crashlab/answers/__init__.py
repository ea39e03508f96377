"""Answers to earlier lessons, for later lessons to build on (lesson 2's agents run lesson 1's loop).

Kept apart from the rest of the library on purpose: a graded release leaves this package out, and the
grader refuses it as a submission's own work. Grading lesson NN (``CRASHLAB_GRADING_LESSON=NN``), the
answers of lesson NN and later do not import -- and when isolated, their files are hidden from the
student's processes altogether.
"""

from __future__ import annotations

import os

from crashlab.plumbing.sandbox import ENV_GRADING_LESSON


def refuse_while_grading(lesson: str) -> None:
    """Raise ImportError in a module holding lesson ``lesson``'s answers, while that lesson (or an
    earlier one) is being graded."""
    graded = os.environ.get(ENV_GRADING_LESSON)
    if graded and graded <= lesson:
        raise ImportError(f"the answers to lesson {lesson} cannot be used while lesson {graded} is graded: "
                          "write your own")


def answer_files(lesson: str) -> list[str]:
    """The files holding the answers of ``lesson`` and every later lesson (to hide while grading it): each
    module's source and the bytecode compiled from it, which imports as well as the source does (``make setup``
    compiles the library on purpose; any import as root leaves a ``.pyc`` behind). The whole ``__pycache__``
    folder goes: hiding a folder leaves no compiled name to miss."""
    here = os.path.dirname(os.path.abspath(__file__))
    sources = [os.path.join(here, name) for name in os.listdir(here)
               if name.startswith("lesson") and name.endswith(".py") and name[6:8] >= lesson]
    cache = os.path.join(here, "__pycache__")
    return sorted(sources) + ([cache] if sources and os.path.isdir(cache) else [])
