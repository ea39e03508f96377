"""What a master's ``metadata.crashlab`` holds, typed in one place: the lesson's id and title, its graded crash
matrices, the agents the demo runs, the answers later checks borrow from the reference, and the earlier lessons
whose files it uses. The grader, the builder, the release, the demo and the soak read it through
:func:`lesson_meta`; ``tests/grading/test_build.py`` refuses a master whose metadata names a key not typed here,
which would otherwise be silently ignored (a ``resumer`` for ``resumers``)."""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict, cast

# The closed vocabularies a lesson's metadata (and crash_test) uses, typed once.
Expect = Literal["durable", "no-repeats", "observe"]  # what a correct agent must show (crashlab.harness.EXPECTATIONS)
LauncherKind = Literal["warm", "exec"]                  # fork agents from a warm interpreter, or exec a new one


class MatrixCheck(TypedDict, total=False):
    """One graded crash matrix: the agent file the student's answers build, run at the crash points."""

    name: Required[str]             # the grade id of its line in the results
    agent: Required[str]            # the agent file the lesson writes
    order: str                      # the order (or backlog) the agent runs; the lesson order ORD-8842 by default
    points: Required[int]           # what a clean matrix scores
    stated: Required[str]           # the words of the exercise's text that this matrix checks
    expect: Required[Expect]        # what a correct agent must show at every point
    crash_points: str | list[str]   # "all" (the default) or the points to run
    resumers: int                   # resuming processes racing per row
    double: int | list[list[str]]   # that many double crashes, sampled (crashlab.crash_points.double_crash_pairs), or the pairs
    jobs: int                       # rows at once
    timeout: float                  # seconds per process
    fail: str                       # a permanent failure: the matrix runs its failure path
    faults: list                    # faults the world injects for every row
    needs: str | list[str]          # servers besides the world (the engine registry's names; their imports preloaded)
    preload: list[str]              # more modules the warm launcher imports before it forks the agents
    launcher: LauncherKind          # "warm" (the default) or "exec"
    env: dict[str, str]             # variables for the agents
    on_reference_answers: bool | list[str]  # the master's answers (of reference_answers) the agent runs on
                                    # instead of the student's: those named, or true for every one


class DemoAgent(TypedDict, total=False):
    """One agent the demo (and the soak's references) runs from this lesson."""

    agent: Required[str]
    title: Required[str]
    expect: Required[Expect]
    crash_points: str | list[str]
    preload: list[str]
    launcher: LauncherKind
    fail: str
    needs: str | list[str]
    env: dict[str, str]
    resumers: int


class LessonMeta(TypedDict, total=False):
    lesson: Required[str]               # "01" ... "11"
    title: Required[str]
    matrix_checks: list[MatrixCheck]
    demo_agents: list[DemoAgent]
    reference_answers: list[str]        # grade ids whose reference answers later checks may borrow
    uses_lessons: list[str]             # earlier lessons whose files this lesson's checks run
    check_timeout: float                # seconds the judge gives each check


def lesson_meta(nb: Any) -> LessonMeta:
    """A notebook's ``metadata.crashlab`` (empty for a notebook that is not a lesson)."""
    return cast(LessonMeta, (nb.get("metadata", {}) or {}).get("crashlab") or {})  # unknown_keys() checks it


def unknown_keys(meta: LessonMeta) -> list[str]:
    """Keys of ``meta`` (and of its matrices and demo agents) that no type here names, as dotted paths."""
    found = [key for key in meta if key not in LessonMeta.__annotations__]
    entries: dict[str, list[Any]] = {"matrix_checks": list(meta.get("matrix_checks", [])),
                                     "demo_agents": list(meta.get("demo_agents", []))}
    for kind, typed in (("matrix_checks", MatrixCheck), ("demo_agents", DemoAgent)):
        for i, entry in enumerate(entries[kind]):
            found += [f"{kind}[{i}].{key}" for key in entry if key not in typed.__annotations__]
    return found


__all__ = ["DemoAgent", "Expect", "LauncherKind", "LessonMeta", "MatrixCheck", "lesson_meta", "unknown_keys"]
