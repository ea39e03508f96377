"""The durability benchmark behaves: a floor in every run, ratios against that very floor, a reason for
every engine that cannot run, the documented JSON, the frameworks' integrations measured beside their engines'
own rows, and no process left behind. Speed is never asserted."""

import json
import math
import os
import statistics
from pathlib import Path

import pytest

from crashlab import bench
from crashlab.cli import bench as bench_cli

ROW_KEYS = {"engine", "per_step_ms", "ratio_to_floor", "recovery_s", "recovery_startup_s", "recovery_steps_run",
            "samples_ms", "note"}
TOP_KEYS = {"steps", "repeats", "engines", "floor_ms", "recovery", "recovery_steps", "recovery_kill_at", "rows",
            "machine", "versions", "started", "elapsed_s", "lengths", "result_bytes", "long_rows"}
LONG_ROW_KEYS = {"engine", "bytes_at", "bytes_per_turn", "exponent", "recovery_s", "note"}
# Two engines' own rows, and the cheapest integration beside one of them (no server, no framework to import)
SMALL_RUN_ROWS = ["langgraph-sync", "dbos-sqlite", "langgraph-functional"]
STEPS = 30  # enough steps that the per-step figure stands clear of one run's timing noise
LENGTHS = [6]  # the length axis on real engines: one short length, as each is a crash and a resume per engine


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bench")
    result = bench.run_benchmark(steps=STEPS, repeats=1, engines=["floor", *SMALL_RUN_ROWS], workdir=workdir,
                                 progress=False, timeout_s=60)
    return result, workdir


@pytest.mark.timeout(120)
def test_floor_row_exists_and_ratios_use_this_runs_floor(small_run):
    result, workdir = small_run
    floor = result.row("floor")
    assert floor.per_step_ms is not None and floor.per_step_ms > 0, result.table()
    assert floor.ratio_to_floor == pytest.approx(1.0)
    # the floor is the median of the samples this run's floor processes wrote (before and after the engines)
    (run_dir,) = [p for p in workdir.iterdir() if p.name.startswith("run-")]
    written = []
    for name in ("floor.json", "floor-after.json"):
        written += json.loads((run_dir / name).read_text())["samples_ms"]
    assert floor.samples_ms == pytest.approx(written, abs=1e-3)
    assert result.floor_ms == pytest.approx(statistics.median(written), abs=1e-3)
    for engine in ("langgraph-sync", "dbos-sqlite"):
        row = result.row(engine)
        assert row.per_step_ms is not None and row.per_step_ms > 0, f"{engine}: {row.note}"
        assert row.ratio_to_floor == pytest.approx(row.per_step_ms / result.floor_ms)


@pytest.mark.timeout(120)
def test_recovery_after_sigkill_resumes_instead_of_starting_over(small_run):
    result, _ = small_run
    kill_at = STEPS // 2 + 1
    assert result.recovery_kill_at == kill_at
    for engine in ("langgraph-sync", "dbos-sqlite"):
        row = result.row(engine)
        assert row.recovery_s is not None and 0 < row.recovery_startup_s < row.recovery_s, f"{engine}: {row.note}"
        # the new process ran the killed step again and the rest, but not the steps already recorded
        assert row.recovery_steps_run == STEPS - kill_at + 1, f"{engine}: {row.note}"
    assert result.row("floor").recovery_s is None
    assert "resumed at step" in result.row("dbos-sqlite").note


@pytest.mark.timeout(120)
def test_json_has_the_documented_keys(small_run):
    result, _ = small_run
    data = json.loads(json.dumps(result.as_dict()))
    assert set(data) == TOP_KEYS
    assert data["steps"] == STEPS and data["repeats"] == 1 and data["recovery"] is True
    assert [r["engine"] for r in data["rows"]] == ["floor", *SMALL_RUN_ROWS]
    for r in data["rows"]:
        assert set(r) == ROW_KEYS
    assert {"python", "platform", "cpus", "workdir_fs"} <= set(data["machine"])
    assert {"langgraph", "dbos", "pydantic-ai-slim"} <= set(data["versions"])  # every installed one, asked or not
    text = result.table()
    assert all(name in text for name in ("floor", "langgraph-sync", "dbos-sqlite"))


@pytest.mark.timeout(120)
def test_the_length_axis_reads_each_engines_long_agent_from_its_own_record(tmp_path):
    """One long-agent row per engine (not per variant, not for an integration): its record's bytes at each length,
    a recovery after SIGKILL at each, and a growth exponent that is a number -- LangGraph's checkpoints, which store
    the whole conversation after each turn, growing faster than DBOS's step outputs, which store each result once.
    Bytes are read from the engines' stores, so that comparison does not depend on the machine's speed. The length
    axis alone (per_step=False): a run of its own, so that no worker pays for it with another test's fixture."""
    result = bench.run_benchmark(steps=3, engines=["langgraph-async", "langgraph-sync", "dbos-sqlite"], workdir=tmp_path,
                                 progress=False, recovery=False, timeout_s=60, lengths=LENGTHS, per_step=False)
    assert result.lengths == LENGTHS
    assert [r.engine for r in result.long_rows] == ["langgraph-sync", "dbos-sqlite"]
    for r in result.long_rows:
        assert sorted(r.bytes_at) == LENGTHS and sorted(r.recovery_s) == LENGTHS, f"{r.engine}: {r.note}"
        assert r.bytes_per_turn(6) >= result.result_bytes, "each turn's result is in the record"
        assert all(s > 0 for s in r.recovery_s.values())
        assert isinstance(r.exponent, float) and math.isfinite(r.exponent)
    assert result.long_row("langgraph-sync").exponent > result.long_row("dbos-sqlite").exponent
    assert all(r.per_step_ms is None for r in result.rows), "per_step=False measures no per-step cost"
    data = json.loads(json.dumps(result.as_dict()))
    assert set(data) == TOP_KEYS and data["lengths"] == LENGTHS
    assert all(set(r) == LONG_ROW_KEYS for r in data["long_rows"])
    table = result.table()
    assert "long agent" in table and "exponent" in table and max(map(len, table.splitlines())) <= 95


def test_each_length_is_a_crash_and_a_resume_and_the_exponent_fits_the_longest(tmp_path, monkeypatch):
    """The length axis's bookkeeping, with the recovery scenes faked: a scene per length, SIGKILL in its last turn,
    the bytes after each length from the record's turn-by-turn totals, the exponent over the longest run's (here a
    record that grows like the square of the turns), and a length that failed a note of its own."""
    from crashlab.bench import lengths as bench_lengths

    scenes = []

    def scene(engine, servers, workdir, n, timeout, kill_at, result_bytes):
        scenes.append((n, kill_at, result_bytes))
        if n == 7:
            raise bench.BenchError("the Temporal server went away")
        return {"recovery_s": n / 10, "sizes": [100 * t * t for t in range(1, n + 1)]}

    monkeypatch.setattr(bench_lengths, "recover_engine", scene)
    row = bench_lengths.measure_lengths("temporal", None, tmp_path, [40, 10, 7], 500, 60)
    assert scenes == [(7, 7, 500), (10, 10, 500), (40, 40, 500)]
    assert row.bytes_at == {10: 10_000, 40: 160_000} and row.recovery_s == {10: 1.0, 40: 4.0}
    assert row.bytes_per_turn(40) == 4000 and row.bytes_per_turn(7) is None
    assert row.exponent == pytest.approx(2.0) and "7 turns not measured: the Temporal server went away" in row.note


def test_lengths_parse_and_bad_ones_are_one_line_errors(capsys):
    assert bench_cli._lengths("30, 10,100,10") == [10, 30, 100]
    for option, bad in [*(("--lengths", text) for text in ("1,10", "10,x", f"{bench_cli.MAX_LENGTH + 1}", "")),
                        ("--result-bytes", "0"), ("--result-bytes", f"{bench_cli.MAX_RESULT_BYTES + 1}")]:
        with pytest.raises(SystemExit) as exited:
            bench_cli.main([option, bad])
        assert exited.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err and option in err[-1] and "Traceback" not in "\n".join(err), err
    with pytest.raises(ValueError, match="at least 2 turns"):
        bench.run_benchmark(steps=3, engines=["floor"], lengths=[1], progress=False)


def _assert_measured_beside(result, variant: str, title: str, beside: str) -> None:
    """A finite figure, its ratio to this run's floor, and a note (in the table too) naming the engine row it is
    set against, with the ratio of the two."""
    row, bare = result.row(variant), result.row(beside)
    assert row.per_step_ms is not None and math.isfinite(row.per_step_ms) and row.per_step_ms > 0, row.note
    assert row.ratio_to_floor == pytest.approx(row.per_step_ms / result.floor_ms)
    pair = f"{title}: {row.per_step_ms / bare.per_step_ms:.1f} x {beside}'s per step"
    assert row.note.startswith(pair) and pair in " ".join(result.table().split()), row.note  # notes wrap


@pytest.mark.timeout(120)
def test_langgraphs_functional_api_is_measured_and_recovered_beside_the_graph(small_run):
    result, _ = small_run
    _assert_measured_beside(result, "langgraph-functional", "LangGraph's functional API", "langgraph-sync")
    row, kill_at = result.row("langgraph-functional"), STEPS // 2 + 1
    # Nothing from the killed step on is skipped. Unlike the graph's supersteps, a @task's saved result can still be
    # on its way to the checkpointer when the process dies, so the last completed step or two may run again (seen
    # on a fresh clone: resumed at step 14 of a kill at 16); the note must say where it resumed, as the steps show.
    assert row.recovery_steps_run >= STEPS - kill_at + 1, row.note
    assert f"resumed at step {STEPS - row.recovery_steps_run + 1}" in row.note, row.note


@pytest.mark.timeout(90)
def test_pydantic_ai_on_dbos_is_measured_beside_bare_dbos(tmp_path):
    """The agent's steps are tool calls a local model asks for, each a DBOS step beside the model request's."""
    result = bench.run_benchmark(steps=STEPS, repeats=1, engines=["dbos+pydantic-ai"], workdir=tmp_path,
                                 progress=False, recovery=False, timeout_s=60)
    assert [r.engine for r in result.rows] == ["floor", "dbos-sqlite", "dbos+pydantic-ai"]
    _assert_measured_beside(result, "dbos+pydantic-ai", "Pydantic AI on DBOS", "dbos-sqlite")
    assert "two DBOS steps" in result.row("dbos+pydantic-ai").note


@pytest.mark.timeout(30)
def test_an_integration_named_alone_brings_its_engines_row(tmp_path, monkeypatch):
    """The pairing, with the measurement faked (the real one is above and in the lessons): each integration comes
    right after its engine's own row, put there when not named; the table says which pair each ratio is of;
    the default run is the engines' own rows only."""
    from crashlab.bench import run as bench_run
    from crashlab.engines.registry import integrations

    per_step = {"floor": 0.5, "temporal": 20.0, "temporal+pydantic-ai": 60.0}
    monkeypatch.setattr(bench_run, "availability", lambda engine: None)
    monkeypatch.setattr(bench_run, "measure_engine", lambda engine, *args, **kwargs: [per_step.get(engine, 0.0)])
    result = bench.run_benchmark(steps=3, repeats=1, engines=["temporal+pydantic-ai", "restate+pydantic-ai"],
                                 workdir=tmp_path, progress=False, recovery=False)
    assert [r.engine for r in result.rows] == ["floor", "temporal", "temporal+pydantic-ai", "restate",
                                               "restate+pydantic-ai"]
    assert "Pydantic AI on Temporal: 3.0 x temporal's per step" in " ".join(result.table().split())
    assert "Pydantic AI on Restate, beside restate (not both measured)" in result.row("restate+pydantic-ai").note
    assert integrations() == ("langgraph-functional", "dbos+pydantic-ai", "temporal+pydantic-ai", "restate+pydantic-ai")
    assert not set(bench.engine_rows()) & set(integrations())


@pytest.mark.timeout(60)
def test_engines_that_cannot_run_become_rows_with_a_reason(tmp_path, monkeypatch):
    from crashlab.engines import postgres

    monkeypatch.setattr(postgres, "postgres_available", lambda: (False, "no PostgreSQL on this machine (test)"))
    result = bench.run_benchmark(steps=3, repeats=1, engines=["dbos-postgres", "no-such-engine"], workdir=tmp_path,
                                 progress=False, recovery=False)
    assert [r.engine for r in result.rows] == ["floor", "dbos-postgres", "no-such-engine"]  # the floor is added
    assert result.row("floor").samples_ms and result.floor_ms is not None  # measured (3 steps may be all noise)
    pg, unknown = result.row("dbos-postgres"), result.row("no-such-engine")
    assert pg.per_step_ms is None and pg.ratio_to_floor is None and pg.recovery_s is None
    assert "no PostgreSQL on this machine (test)" in pg.note
    assert "unknown engine" in unknown.note and unknown.per_step_ms is None
    assert "no PostgreSQL on this machine (test)" in " ".join(result.table().split())

    import matplotlib

    matplotlib.use("Agg")
    ax = result.plot()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["floor", "dbos-postgres", "no-such-engine"]
    lost = result.floor_ms <= 0  # 3 fsyncs can take less than 1 on a busy disk: the floor has no ratio then either
    assert sum(t.get_text() == "n/a" for t in ax.texts) == 2 + lost


@pytest.mark.timeout(60)
def test_a_measurement_that_hangs_is_killed_and_reported(tmp_path):
    result = bench.run_benchmark(steps=3, repeats=1, engines=["floor", "langgraph-exit"], workdir=tmp_path,
                                 progress=False, recovery=False, timeout_s=0.5)
    row = result.row("langgraph-exit")
    assert row.per_step_ms is None and "timed out after 0.5 s" in row.note
    assert _processes_mentioning(str(tmp_path)) == [], "a benchmark process outlived its timeout"


@pytest.mark.timeout(60)
def test_command_line_writes_the_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_cli.main(["--engines", "floor", "--steps", "40", "--repeats", "1", "--no-recovery",
                       "--workdir", str(tmp_path / "work"), "--json", str(out), "--lengths", "3"]) == 0
    data = json.loads(out.read_text())
    assert set(data) == TOP_KEYS and data["rows"][0]["engine"] == "floor" and data["floor_ms"] > 0
    assert data["lengths"] == [3] and data["long_rows"] == []
    said = capsys.readouterr().out
    assert "floor" in said and "no long agent was measured" in said  # the floor has none: the table says so


@pytest.mark.timeout(120)
def test_restate_is_measured_on_a_real_server_and_resumes_from_its_journal(tmp_path):
    """One Restate server for the run, stopped after it; the per-step ratio is to this run's floor; the new
    endpoint process replays the journal and runs only the killed step and the rest."""
    from restate_or_skip import restate_or_skip

    restate_or_skip()
    # (t(N steps) - t(1 step)) / (N - 1): with N = 6 the invocation's own jitter (a few ms) could exceed five steps
    # of about a millisecond and make the figure negative (seen once in CI); 40 steps take well under a second.
    steps = 40
    result = bench.run_benchmark(steps=steps, repeats=1, engines=["floor", "restate"], workdir=tmp_path,
                                 progress=False, timeout_s=60, lengths=[4])
    long = result.long_row("restate")  # its long agent's journal, read as the lessons read an order's
    assert long.bytes_at.get(4, 0) >= 4 * result.result_bytes and 4 in long.recovery_s, long.note
    assert long.bytes_per_turn(4) < 2 * result.result_bytes, "a ctx.run's result is journaled once, not its input"
    assert long.exponent is not None and math.isfinite(long.exponent), long.note
    row = result.row("restate")
    assert row.per_step_ms is not None and row.per_step_ms > 0, row.note
    assert row.ratio_to_floor == pytest.approx(row.per_step_ms / result.floor_ms)
    assert row.recovery_s is not None and 0 < row.recovery_startup_s < row.recovery_s, row.note
    assert row.recovery_steps_run == steps - (steps // 2 + 1) + 1, row.note
    assert f"resumed at step {steps // 2 + 1}, the killed one" in row.note
    assert "restate-sdk" in result.versions and "restate" in result.table()
    assert _processes_mentioning(str(tmp_path)) == [], "the Restate server or an endpoint outlived the benchmark"


@pytest.mark.timeout(30)
def test_restate_without_its_binary_is_a_row_that_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CRASHLAB_RESTATE_BIN", str(tmp_path / "no-such-restate-server"))
    result = bench.run_benchmark(steps=3, repeats=1, engines=["restate"], workdir=tmp_path, progress=False,
                                 recovery=False)
    row = result.row("restate")
    assert row.per_step_ms is None and "make setup" in row.note, row.note


@pytest.mark.timeout(30)
def test_a_floor_lost_in_the_noise_gives_no_ratios_and_says_so(tmp_path, monkeypatch):
    """Three fsyncs can take less than one on a busy disk: (t(N) - t(1)) / (N - 1) is then zero or below,
    and dividing by it would print negative multiples."""
    from crashlab.bench import run as bench_run

    monkeypatch.setattr(bench_run, "availability", lambda engine: None)
    samples = iter([[-0.33], [2.0], [-0.2]])  # the floor, dbos-sqlite, the floor again
    monkeypatch.setattr(bench_run, "measure_engine", lambda engine, *a, **k: next(samples))
    result = bench.run_benchmark(steps=3, repeats=1, engines=["floor", "dbos-sqlite"], workdir=tmp_path,
                                 progress=False, recovery=False)
    floor, dbos = result.row("floor"), result.row("dbos-sqlite")
    assert floor.per_step_ms < 0 and "below this run's noise" in floor.note
    assert floor.ratio_to_floor is None and dbos.ratio_to_floor is None
    ax = result.plot()
    assert "below the noise" in ax.get_title()
    assert sum(t.get_text() == "n/a" for t in ax.texts) == 2, "no bar is drawn against a floor lost in the noise"



@pytest.mark.timeout(30)
def test_an_engine_lost_in_the_noise_has_no_figure_rather_than_a_negative_one(tmp_path, monkeypatch):
    """On a machine loaded to 30, Restate's (t(N) - t(1)) / (N - 1) came out at -0.04 ms, and a lesson printed it as
    the cheapest engine, -1429 x cheaper than the dearest: such a row has no figure, and says why."""
    from crashlab.bench import run as bench_run

    monkeypatch.setattr(bench_run, "availability", lambda engine: None)
    samples = iter([[2.0], [-0.04], [2.2]])  # the floor, dbos-sqlite, the floor again
    monkeypatch.setattr(bench_run, "measure_engine", lambda engine, *a, **k: next(samples))
    result = bench.run_benchmark(steps=3, repeats=1, engines=["floor", "dbos-sqlite"], workdir=tmp_path,
                                 progress=False, recovery=False)
    dbos = result.row("dbos-sqlite")
    assert dbos.per_step_ms is None and not dbos.ok and "below this run's noise" in dbos.note
    assert dbos.samples_ms == [-0.04] and dbos.ratio_to_floor is None
    assert "below this run's noise" in result.table()


@pytest.mark.timeout(30)
def test_long_agents_beside_an_earlier_run_take_its_per_step_costs_instead_of_measuring_again(tmp_path, monkeypatch):
    """The side-by-side lesson's long rows: one per engine (each registry entry's long_bench row), set beside the
    per-step costs its benchmark cell measured a moment before, which are not measured a second time."""
    from crashlab.bench import run as bench_run
    from crashlab.engines.registry import ENGINES

    monkeypatch.setattr(bench_run, "availability", lambda engine: None)
    monkeypatch.setattr(bench_run, "measure_engine", lambda engine, *a, **k: [2.0])
    earlier = bench.run_benchmark(steps=3, repeats=1, engines=["dbos-sqlite"], workdir=tmp_path, progress=False,
                                  recovery=False)
    monkeypatch.setattr(bench_run, "measure_engine", lambda *a, **k: pytest.fail("a per-step cost measured again"))
    monkeypatch.setattr(bench_run, "measure_lengths", lambda engine, servers, workdir, lengths, *a, **k:
                        bench.LongRow(engine, {n: 1500 * n for n in lengths}, {n: 1.0 for n in lengths}, 1.0))
    result = bench.run_long_agents([30], beside=earlier, workdir=tmp_path, progress=False)
    assert [r.engine for r in result.long_rows] == [entry.long_bench for entry in ENGINES.values()]
    assert result.row("dbos-sqlite").per_step_ms == 2.0
    table = result.long_table()
    assert "dbos-sqlite     2.000 ms" in table and "1.5 KB" in table and "B/turn@30" in table
