"""The results of a benchmark run: one :class:`BenchRow` per engine and the :class:`BenchResult` that holds
them with the run's settings, machine and versions, and turns them into a text table (also the notebook's
Markdown), the documented JSON (``as_dict``), and two bar charts: per-step cost against the fsync floor
(``plot``) and recovery time after SIGKILL (``plot_recovery``). Nothing here measures anything."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from crashlab.bench.lengths import LongRow, long_table
from crashlab.engines.registry import FLOOR_COLOUR, engine_of_variant
from crashlab.plumbing.lines import fit


@dataclass
class BenchRow:
    engine: str
    per_step_ms: float | None = None
    ratio_to_floor: float | None = None
    recovery_s: float | None = None
    note: str = ""
    recovery_startup_s: float | None = None
    recovery_steps_run: int | None = None
    samples_ms: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.per_step_ms is not None


@dataclass
class BenchResult:
    steps: int
    repeats: int
    engines: list[str]
    rows: list[BenchRow]
    recovery: bool
    recovery_steps: int
    recovery_kill_at: int
    machine: dict[str, Any]
    versions: dict[str, str]
    started: str
    elapsed_s: float
    lengths: list[int] = field(default_factory=list)       # the length axis (turns), if measured
    long_rows: list[LongRow] = field(default_factory=list)  # each engine's long agent on it
    result_bytes: int = 0                                    # the long agent's result per turn

    def long_row(self, engine: str) -> LongRow:
        for r in self.long_rows:
            if r.engine == engine:
                return r
        raise KeyError(engine)

    @property
    def floor_ms(self) -> float | None:
        return next((r.per_step_ms for r in self.rows if r.engine == "floor"), None)

    def row(self, engine: str) -> BenchRow:
        for r in self.rows:
            if r.engine == engine:
                return r
        raise KeyError(engine)

    def as_dict(self) -> dict[str, Any]:
        rows = []
        for r in self.rows:
            d = asdict(r)
            rows.append({k: d[k] for k in ("engine", "per_step_ms", "ratio_to_floor", "recovery_s",
                                           "recovery_startup_s", "recovery_steps_run", "samples_ms", "note")})
        return {"steps": self.steps, "repeats": self.repeats, "engines": list(self.engines),
                "floor_ms": self.floor_ms, "recovery": self.recovery, "recovery_steps": self.recovery_steps,
                "recovery_kill_at": self.recovery_kill_at, "rows": rows, "machine": dict(self.machine),
                "versions": dict(self.versions), "started": self.started, "elapsed_s": round(self.elapsed_s, 2),
                "lengths": list(self.lengths), "result_bytes": self.result_bytes,
                "long_rows": [{"engine": r.engine, "bytes_at": {str(n): b for n, b in r.bytes_at.items()},
                               "bytes_per_turn": {str(n): r.bytes_per_turn(n) for n in r.bytes_at},
                               "exponent": r.exponent, "recovery_s": {str(n): s for n, s in r.recovery_s.items()},
                               "note": r.note} for r in self.long_rows]}

    def table(self) -> str:
        """The figures in columns, the run's settings on the line under them, then each engine's note on lines of
        its own (a note can be a sentence long): no line wider than
        :data:`~crashlab.plumbing.lines.LINE_WIDTH`."""
        head = ["engine", "per step", "x floor", "recovery", "of which start-up", "steps rerun"]
        lines = []
        for r in self.rows:
            rerun = (f"{r.recovery_steps_run}/{self.recovery_steps}" if r.recovery_steps_run is not None else "-")
            lines.append([r.engine,
                          f"{r.per_step_ms:.3f} ms" if r.per_step_ms is not None else "-",
                          f"{r.ratio_to_floor:.1f}" if r.ratio_to_floor is not None else "-",
                          f"{r.recovery_s:.2f} s" if r.recovery_s is not None else "-",
                          f"{r.recovery_startup_s:.2f} s" if r.recovery_startup_s is not None else "-",
                          rerun])
        widths = [max(len(h), *(len(row[i]) for row in lines)) if lines else len(h) for i, h in enumerate(head)]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        out = [fmt(head), fmt(["-" * w for w in widths])]
        out += [fmt(row) for row in lines]
        kill = (f"; recovery: SIGKILL in step {self.recovery_kill_at} of {self.recovery_steps}"
                if self.recovery else "; recovery not measured")
        out.append(f"{self.steps} steps per workflow, median of {self.repeats} run(s){kill}; "
                   f"{self.machine.get('cpus')} CPUs, workdir on {self.machine.get('workdir_fs')}, "
                   f"{self.elapsed_s:.0f} s in all")
        notes = [f"{r.engine}: {r.note}" for r in self.rows if r.note]
        if notes:
            out += ["", "notes:", *(f"  {note}" for note in notes)]
        if self.lengths:
            out += ["", self.long_table()]
        return fit("\n".join(out), indent="    ")

    def long_table(self) -> str:
        """The length axis alone: one long-agent row per engine, beside its per-step cost from this run."""
        return fit(long_table(self.long_rows, self.lengths, {r.engine: r.per_step_ms for r in self.rows},
                              self.result_bytes), indent="    ")

    def __str__(self) -> str:
        return self.table()

    def _repr_markdown_(self) -> str:  # a readable table in Jupyter
        return "```\n" + self.table() + "\n```"

    def plot(self, ax=None):
        """Bars: each engine's per-step cost as a multiple of the fsync floor (log axis), labelled in ms.
        Engines that did not run are named at the bottom with 'n/a'."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(min(9.4, max(6.0, 1.1 * len(self.rows) + 1.5)), 4.2))  # a notebook's width
        names = [r.engine for r in self.rows]
        xs = list(range(len(names)))
        measured = [(x, r) for x, r in zip(xs, self.rows) if r.ratio_to_floor is not None and r.ratio_to_floor > 0]
        for x, r in measured:
            entry = engine_of_variant(r.engine)
            color = entry.colour if entry else FLOOR_COLOUR
            ax.bar(x, r.ratio_to_floor, color=color, width=0.65)
            ax.annotate(f"{r.per_step_ms:.2f} ms", (x, r.ratio_to_floor), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=10)
        ax.set_yscale("log")
        if measured:
            top = max(r.ratio_to_floor for _, r in measured)
            low = min(r.ratio_to_floor for _, r in measured)
            ax.set_ylim(min(0.5, low / 2), top * 4)
        for x, r in zip(xs, self.rows):
            if r.ratio_to_floor is None or r.ratio_to_floor <= 0:
                ax.annotate("n/a", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 4),
                            textcoords="offset points", ha="center", va="bottom", fontsize=10, color="#999999")
        ax.axhline(1.0, color="#8c8c8c", linewidth=0.8, linestyle=":")
        ax.set_xticks(xs)
        ax.set_xticklabels(names, rotation=20, ha="right")
        floor = (f"{self.floor_ms:.3f} ms" if self.floor_ms and self.floor_ms > 0 else
                 "below the noise" if self.floor_ms is not None else "not measured")
        ax.set_ylabel("per-step cost / fsync floor (log)")
        ax.set_title(f"Cost of one durable step (floor = append + fsync, {floor})\n"
                     f"{self.steps} steps, median of {self.repeats}", fontsize=10)
        return ax

    def plot_recovery(self, ax=None):
        """Bars: seconds from spawning the recovering process to the workflow's result, start-up shaded."""
        import matplotlib.pyplot as plt

        rows = [r for r in self.rows if r.recovery_s is not None]
        if ax is None:
            _, ax = plt.subplots(figsize=(min(9.4, max(6.0, 1.1 * len(rows) + 1.5)), 4.2))
        xs = list(range(len(rows)))
        startup = [r.recovery_startup_s or 0.0 for r in rows]
        rest = [max(0.0, r.recovery_s - s) for r, s in zip(rows, startup)]
        ax.bar(xs, startup, color="#cccccc", width=0.65, label="process start-up and imports")
        ax.bar(xs, rest, bottom=startup, color="#4c72b0", width=0.65, label="engine recovery and remaining steps")
        for x, r in zip(xs, rows):
            ax.annotate(f"{r.recovery_s:.2f} s", (x, r.recovery_s), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=10)
        ax.set_xticks(xs)
        ax.set_xticklabels([r.engine for r in rows], rotation=20, ha="right")
        ax.set_ylabel("seconds")
        ax.set_title(f"From a new process to the result, after SIGKILL in step {self.recovery_kill_at} "
                     f"of {self.recovery_steps}", fontsize=10)
        ax.legend(fontsize=10, loc="upper left")
        return ax
