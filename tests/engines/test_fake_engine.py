"""An engine is one registry entry: a sixth engine added through the registry alone (an ``Engine`` in
``registry.ENGINES``, nothing else touched) is seen by the grader's sandbox and isolation, by the benchmark, by
``needs`` and by the command line -- and a server that cannot start says so in one line, whichever engine's."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest

from crashlab.cli.main import build_parser, main
from crashlab.engines import registry
from crashlab.engines.engine import Engine, Server
from crashlab.engines.needs import Needs, needs_of, preload_of
from crashlab.engines.record import Record, Store
from crashlab.engines.workload import Workload, Workloads
from crashlab.errors import ServerError

AGENT = Path(__file__).resolve().parents[1] / "agents" / "naive_agent.py"
URL, BIN = "CRASHLAB_FAKEDB_URL", "CRASHLAB_FAKEDB_BIN"


class FakeServerError(ServerError):
    pass


class FakeWorkloads(Workloads):
    env = ("CRASHLAB_FAKEDB_BENCH",)

    def unavailable(self, variant: str) -> str | None:
        return None

    def make(self, variant: str, workdir: Path, recovery: bool = False) -> Workload:
        raise AssertionError("measured in a child process, which this test fakes")

    def note(self, variant: str) -> list[str]:
        return ["a fake engine's note"]


class FakeReader:
    what = "nothing at all"

    def read(self, store: Store, order_id: str) -> Record:
        return Record("fakedb", order_id, ())


@contextlib.contextmanager
def serve(folder: Path, timeout: float):
    folder.mkdir(parents=True)
    yield {URL: f"fake://{folder}"}


@contextlib.contextmanager
def cannot_serve(folder: Path, timeout: float):
    raise FakeServerError("the fakedb binary was not found; install it with `make setup`")
    yield {}


def fake_engine(start=serve) -> Engine:
    return Engine("fakedb", "FakeDB", "#123456", packages=("fakedb-sdk",), imports=("json",), env=(URL,),
                  bench=("fakedb",), workload=FakeWorkloads(), records=FakeReader.what, record=FakeReader(),
                  server=Server(start, BIN, FakeServerError))


@pytest.fixture
def fake(monkeypatch):
    engine = fake_engine()
    monkeypatch.setitem(registry.ENGINES, engine.name, engine)
    return engine


def test_the_sandbox_lets_a_students_process_see_its_variables_and_nothing_of_the_graders(fake, monkeypatch, tmp_path):
    from crashlab.grading.isolation import Isolation
    from crashlab.harness import run_python

    monkeypatch.setenv(URL, "fake://db")
    monkeypatch.setenv(BIN, "/opt/fakedb")
    monkeypatch.setenv("CRASHLAB_WORLD_TOKEN", "the grader's own")
    monkeypatch.setenv("CRASHLAB_GRADING_LESSON", "99")  # grading: a student's process starts from the allow-list
    seen = json.loads(run_python(["-c", "import json, os; print(json.dumps(dict(os.environ)))"]).stdout)
    assert seen[URL] == "fake://db" and seen[BIN] == "/opt/fakedb" and "CRASHLAB_WORLD_TOKEN" not in seen
    isolation = Isolation(tmp_path, False, hide=())
    try:
        kernel = isolation.env(trusted=False)
        assert kernel[BIN] == "/opt/fakedb" and "CRASHLAB_WORLD_TOKEN" not in kernel
    finally:
        isolation.close()


def test_needs_start_its_server_and_preload_its_imports(fake, tmp_path):
    assert "fakedb" in registry.with_server() and needs_of({"needs": "fakedb"}) == ("fakedb",)
    assert preload_of("fakedb") == ("json",)
    with Needs(tmp_path) as needs:
        assert needs.env_for({"needs": ["fakedb"]}) == {URL: f"fake://{tmp_path / 'fakedb'}"}


def test_the_benchmark_measures_its_rows_on_its_server_and_keeps_its_variables_from_the_children(
        fake, monkeypatch, tmp_path):
    from crashlab import bench
    from crashlab.bench import run as bench_run
    from crashlab.bench.common import child_scrubbed, variants
    from crashlab.bench.spawn import _child_env

    assert "fakedb" in bench.engine_rows() and "fakedb" in variants()
    assert {URL, "CRASHLAB_FAKEDB_BENCH"} <= set(child_scrubbed())
    monkeypatch.setenv(URL, "fake://the caller's own")
    assert URL not in _child_env()
    envs = {}

    def measured(engine, servers, *args, **kwargs) -> list[float]:  # what the row's child would get, and a figure
        envs.setdefault(engine, servers.env_for(engine))
        return [1.0]

    monkeypatch.setattr(bench_run, "measure_engine", measured)
    result = bench.run_benchmark(steps=3, repeats=1, engines=["fakedb"], workdir=tmp_path, progress=False,
                                 recovery=False)
    assert [r.engine for r in result.rows] == ["floor", "fakedb"] and result.row("floor").ok
    assert "a fake engine's note" in result.row("fakedb").note
    assert envs["fakedb"][URL].startswith("fake://")  # its server, started from the registry for its row


def test_the_command_line_names_it_and_a_server_that_cannot_start_is_one_line(monkeypatch, capsys):
    engine = fake_engine(start=cannot_serve)
    monkeypatch.setitem(registry.ENGINES, engine.name, engine)
    soak = next(a for a in build_parser()._subparsers._group_actions[0].choices["soak"]._actions  # type: ignore
                if "--needs" in a.option_strings)
    assert "fakedb" in soak.choices and "FakeDB" in soak.help
    assert main(["soak", str(AGENT), "--needs", "fakedb", "--orders", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "fakedb binary was not found" in err


@pytest.mark.parametrize("name", registry.with_server())
def test_each_real_engine_without_its_binary_is_one_line_in_the_soak(name, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(registry.ENGINES[name].server.binary_env, str(tmp_path / "no-such-binary"))
    assert main(["soak", str(AGENT), "--needs", name, "--orders", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(tmp_path / "no-such-binary") in err


def test_the_fake_is_gone_after_its_test():
    assert "fakedb" not in registry.ENGINES and "fakedb" not in registry.with_server()
    assert sys.modules.get("fakedb") is None
