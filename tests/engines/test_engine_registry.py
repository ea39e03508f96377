"""The engine registry is complete: every entry has every field, every engine with a server can be served by
name, and the places that used to keep their own table of engines now read this one."""

from pathlib import Path

from crashlab.bench.common import engine_rows, workloads_for
from crashlab.engines import registry
from crashlab.engines.engine import Engine
from crashlab.engines.needs import preload_of
from crashlab.engines.record import RecordReader
from crashlab.engines.restate.server import RESTATE_VERSION
from crashlab.engines.workload import Workloads
from crashlab.errors import ServerError

ENGINES_DIR = Path(registry.__file__).parent


def test_no_entry_lacks_a_field():
    assert registry.missing_fields() == []


def test_every_engine_has_its_own_colour_and_benchmark_rows():
    colours = [e.colour for e in registry.ENGINES.values()] + [registry.FLOOR_COLOUR]
    assert len(set(colours)) == len(colours)
    variants = [v for e in registry.ENGINES.values() for v in e.bench]
    assert engine_rows() == ("floor", *variants) and len(set(variants)) == len(variants)
    assert all(registry.engine_of_variant(v).name == v.split("-")[0] for v in variants)


def test_each_engine_is_a_folder_of_its_own_whose_entry_the_registry_lists():
    folders = sorted(p.name for p in ENGINES_DIR.iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(registry.ENGINES)
    for name, entry in registry.ENGINES.items():
        assert isinstance(entry, Engine) and entry.name == name
        assert isinstance(entry.workload, Workloads) and isinstance(entry.record, RecordReader)
        assert entry.records and entry.record.what == entry.records


def test_needs_are_the_engines_with_a_server_each_with_its_error_binary_and_pin():
    assert set(registry.with_server()) == {name for name, e in registry.ENGINES.items() if e.server} \
        == {"temporal", "restate"}
    assert RESTATE_VERSION == registry.ENGINES["restate"].server.pin
    for name in registry.with_server():
        server = registry.ENGINES[name].server
        assert issubclass(server.error, ServerError) and server.binary_env.startswith("CRASHLAB_")
        assert server.binary_env in registry.student_env() and server.binary_env in registry.server_binaries()
    assert preload_of("temporal") == registry.ENGINES["temporal"].imports


def test_what_a_students_process_may_see_of_the_engines_is_what_their_agents_read_and_their_binaries():
    assert registry.student_env() == {"CRASHLAB_TEMPORAL_ADDRESS", "CRASHLAB_RESTATE_INGRESS", "CRASHLAB_RESTATE_ADMIN",
                                      "CRASHLAB_POSTGRES_URL", "CRASHLAB_SLOW_CHECKPOINTS_S", "CRASHLAB_TEMPORAL_BIN",
                                      "CRASHLAB_RESTATE_BIN"}


def test_an_unknown_engine_is_named_with_those_there_are():
    try:
        registry.engine("cadence")
    except ValueError as exc:
        assert "cadence" in str(exc) and "temporal" in str(exc)
    else:
        raise AssertionError("an unknown engine was accepted")


def test_every_integration_runs_on_its_engine_beside_one_of_its_rows():
    """A framework's integration is a benchmark row of its own on its engine's server and colour, compared with a
    row of that engine; it preloads the engine's imports and its own, and its workload is one of its own."""
    integrations = [(e, i) for e in registry.ENGINES.values() for i in e.integrations]
    assert [i.variant for _, i in integrations] == list(registry.integrations())
    assert len(set(registry.integrations())) == len(registry.integrations())
    assert not set(registry.integrations()) & set(engine_rows())
    for entry, integration in integrations:
        assert registry.engine_of_variant(integration.variant) is entry
        assert registry.integration_of_variant(integration.variant) is integration
        assert integration.beside in entry.bench, integration
        assert registry.imports_of_variant(integration.variant) == (*entry.imports, *integration.imports)
        assert workloads_for(integration.variant) is integration.workload is not entry.workload
    assert registry.integration_of_variant("temporal") is None and registry.engine_of_variant("floor") is None


def test_versions_name_each_package_installed_and_leave_out_what_is_not():
    versions = registry.ENGINES["dbos"].versions()
    assert set(versions) <= {"dbos", "pydantic-ai-slim"} and versions["dbos"][0].isdigit()
