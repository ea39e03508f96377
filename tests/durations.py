"""How long each unit of the suite's work took last time it was measured, so the scheduler can start the longest
first: a 60 s grading that starts last keeps one worker busy a minute after the others have run out of work.

The figures live in ``tests/durations.json`` (seconds per unit: a notebook's path for nbval's cells, a module's
path for a module whose tests share fixtures set up once, a test's node id otherwise; a module measured test by
test is expected to take the sum of its tests). They are refreshed from a run's own report::

    .venv/bin/python -m pytest solutions tests -n 3 --nbval ... --durations=0 > run.log
    .venv/bin/python tests/durations.py run.log          # rewrites tests/durations.json

They only order the work: a stale or missing figure makes the run slower, never wrong. A unit not in the file
counts as :data:`UNKNOWN` seconds, so a new test starts neither first nor last (a new notebook, as the longest)."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")
UNKNOWN = 1.0  # seconds: what a unit missing from the file is taken to take (the file keeps those of a second or more)
LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")


ROOT = FILE.parent.parent  # node ids are relative to the repository
# A fixture set up once for a module's tests (a server, a warm launcher, a built release, a rendered page), declared in
# the module or taken from conftest's module-scoped ``launcher``.
MODULE_FIXTURE = re.compile(r'@pytest\.fixture\([^)]*scope="(?:module|session)"')
USES_LAUNCHER = re.compile(r"^(?:async )?def test_\w+\([^)]*\blauncher\b", re.M)


@functools.cache
def shares_fixtures(path: str) -> bool:
    """Whether the test module at ``path`` sets something up once for its tests. Its tests are then one unit: a
    worker tears a module's fixtures down whenever its next test is another module's, so a module spread over the
    queue would start its servers and launchers again for each of its tests."""
    try:
        source = (ROOT / path).read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(MODULE_FIXTURE.search(source) or USES_LAUNCHER.search(source))


def unit_of(nodeid: str) -> str:
    """A unit of work: a notebook (nbval runs its cells in one kernel, in order), a test module whose tests share
    fixtures set up once (:func:`shares_fixtures`), or one test."""
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") or (path.endswith(".py") and shares_fixtures(path)) else nodeid


def load() -> dict[str, float]:
    """The figures of the last measurement; none if the file is missing or unreadable (the order then falls back
    to xdist's own)."""
    try:
        figures = json.loads(FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in figures.items()} if isinstance(figures, dict) else {}


def expected(unit: str, figures: dict[str, float]) -> float:
    """Seconds ``unit`` is expected to take. A notebook not yet measured (a new or renamed lesson) is taken to be as
    long as the longest one measured: a master runs for minutes, and started last it would hold a worker alone."""
    if unit in figures:
        return figures[unit]
    if unit.endswith(".py"):  # a module measured test by test before its tests became one unit
        measured = [seconds for name, seconds in figures.items() if name.startswith(unit + "::")]
        if measured:
            return sum(measured)
    if unit.endswith(".ipynb"):
        return max((seconds for name, seconds in figures.items() if name.endswith(".ipynb")), default=UNKNOWN)
    return UNKNOWN


def from_report(text: str) -> dict[str, float]:
    """Seconds per unit from pytest's ``--durations=0`` report (setup, call and teardown added up)."""
    totals: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = LINE.match(line)
        if match:
            totals[unit_of(match.group(3))] += float(match.group(1))
    return {unit: round(seconds, 2) for unit, seconds in sorted(totals.items()) if seconds >= UNKNOWN}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/durations.py RUN_LOG   (a pytest run's output with --durations=0)", file=sys.stderr)
        return 2
    figures = from_report(Path(argv[0]).read_text())
    if not figures:
        print(f"error: {argv[0]} has no --durations=0 report", file=sys.stderr)
        return 1
    FILE.write_text(json.dumps(figures, indent=0, sort_keys=True) + "\n")
    print(f"{len(figures)} units, {sum(figures.values()):.0f} s in all, written to {FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
