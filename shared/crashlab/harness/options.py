"""What a crash matrix is, as one value: :class:`MatrixOptions` -- the points, what a correct agent must show, the
double crashes, faults, launcher, the failure path -- which :func:`~crashlab.harness.crash_test` runs. A graded
check or a demo agent (``metadata.crashlab``'s entries, :mod:`crashlab.course.metadata`) becomes one with one set of
defaults (:meth:`MatrixOptions.from_spec`), so the grader and the demo run a lesson's matrix the same way."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, TypedDict

from crashlab.course.metadata import Expect, LauncherKind
from crashlab.crash_points import double_crash_pairs
from crashlab.engines.needs import preload_of

if TYPE_CHECKING:
    from crashlab.harness.launcher import WarmLauncher

Fault = tuple[str, int, "str | None"]  # (name, times, arg), as World.inject takes them: ("lost_ack:charge_card", 1, None)


@dataclass(frozen=True)
class MatrixOptions:
    """One crash matrix: ``points`` (``"all"`` or a list), ``expect``, rows at once (``jobs``), seconds per process,
    resume processes racing after each crash, ``double`` crashes (pairs), ``faults`` armed in every row's world, the
    ``launcher`` (``"warm"``, ``"exec"`` or a running :class:`~crashlab.harness.launcher.WarmLauncher`), what a warm
    one preloads, and a step that ``fail``s for good (the failure path)."""

    points: str | list[str] = "all"
    expect: Expect = "durable"
    jobs: int = 2
    timeout: float = 60.0
    resumers: int = 1
    double: list[tuple[str, str]] | None = None
    faults: list[Fault] | None = None
    launcher: LauncherKind | WarmLauncher = "warm"
    preload: tuple[str, ...] = ()
    fail: str | None = None

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> MatrixOptions:
        """The options a check or demo agent names, the defaults for the rest; the warm launcher preloads what the
        spec names and what the engines it ``needs`` import (the registry's, never retyped in a lesson). ``double``
        is the pairs, or a number of them sampled along the spec's path."""
        double = spec.get("double") or []
        pairs = double_crash_pairs(double, fail=spec.get("fail")) if isinstance(double, int) \
            else [(first, second) for first, second in double]
        return cls(points=spec.get("crash_points", "all"), expect=spec.get("expect", "durable"),
                   jobs=int(spec.get("jobs", 2)), timeout=float(spec.get("timeout", 60)),
                   resumers=int(spec.get("resumers", 1)), double=pairs or None,
                   faults=[(name, int(times), arg[0] if arg else None) for name, times, *arg in spec.get("faults", [])]
                   or None,
                   launcher=spec.get("launcher", "warm"),
                   preload=tuple(dict.fromkeys((*spec.get("preload", ()), *preload_of(spec)))),
                   fail=spec.get("fail"))

    def but(self, **changes: Any) -> MatrixOptions:
        """A copy with ``changes`` (the demo's own points and jobs, say)."""
        return replace(self, **changes)


class MatrixKeywords(TypedDict, total=False):
    """:class:`MatrixOptions`' fields, as :func:`~crashlab.harness.crash_test`'s keyword form takes them."""

    points: str | list[str]
    expect: Expect
    jobs: int
    timeout: float
    resumers: int
    double: list[tuple[str, str]] | None
    faults: list[Fault] | None
    launcher: LauncherKind | WarmLauncher
    preload: tuple[str, ...]
    fail: str | None


__all__ = ["Fault", "MatrixKeywords", "MatrixOptions"]
