"""How a matrix named in a master's metadata is run: :class:`MatrixOptions` turns a graded check or a demo agent
(``metadata.crashlab``'s entries, :mod:`crashlab.course.metadata`) into :func:`~crashlab.harness.crash_test`'s
options with one set of defaults, so the grader and the demo run a lesson's matrix the same way."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Mapping

from crashlab.engines.needs import preload_of


@dataclass(frozen=True)
class MatrixOptions:
    points: str | list[str] = "all"
    expect: str = "durable"
    jobs: int = 2
    timeout: float = 60.0
    resumers: int = 1
    double: list[tuple[str, str]] | None = None
    faults: list[tuple] | None = None
    launcher: str = "warm"
    preload: tuple[str, ...] = ()
    fail: str | None = None

    @classmethod
    def from_spec(cls, spec: Mapping) -> "MatrixOptions":
        """The options a check or demo agent names, the defaults for the rest; the warm launcher preloads what the
        spec names and what the engines it ``needs`` import (the registry's, never retyped in a lesson)."""
        return cls(points=spec.get("crash_points", "all"), expect=spec.get("expect", "durable"),
                   jobs=int(spec.get("jobs", 2)), timeout=float(spec.get("timeout", 60)),
                   resumers=int(spec.get("resumers", 1)),
                   double=[tuple(pair) for pair in spec.get("double", [])] or None,
                   faults=[tuple(fault) for fault in spec.get("faults", [])] or None,
                   launcher=spec.get("launcher", "warm"),
                   preload=tuple(dict.fromkeys((*spec.get("preload", ()), *preload_of(spec)))),
                   fail=spec.get("fail"))

    def but(self, **changes) -> "MatrixOptions":
        """A copy with ``changes`` (the demo's own points and jobs, say)."""
        return replace(self, **changes)

    def crash_test_kwargs(self) -> dict:
        """Keyword arguments for :func:`~crashlab.harness.crash_test` (the points are its second argument)."""
        kwargs = asdict(self)
        kwargs.pop("points")
        kwargs["double"] = self.double  # asdict turns the pairs into lists
        kwargs["faults"] = self.faults
        return kwargs


__all__ = ["MatrixOptions"]
