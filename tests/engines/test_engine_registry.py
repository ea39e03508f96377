"""The engine registry is complete: every entry has every field, every engine with a server can be served by
name, and the places that used to keep their own table of engines now read this one."""

from crashlab.bench.common import ENGINES as BENCH_ROWS
from crashlab.engines import registry
from crashlab.engines.needs import NEEDS
from crashlab.engines.restate.server import RESTATE_VERSION


def test_no_entry_lacks_a_field():
    assert registry.missing_fields() == []


def test_every_engine_has_its_own_colour_and_benchmark_rows():
    colours = [e.colour for e in registry.ENGINES.values()] + [registry.FLOOR_COLOUR]
    assert len(set(colours)) == len(colours)
    variants = [v for e in registry.ENGINES.values() for v in e.bench]
    assert BENCH_ROWS == ("floor", *variants) and len(set(variants)) == len(variants)
    assert all(registry.engine_of_variant(v).name == v.split("-")[0] for v in variants)


def test_needs_are_the_engines_with_a_server_and_the_pins_are_read_from_the_registry():
    assert set(NEEDS) == {name for name, e in registry.ENGINES.items() if e.server} == {"temporal", "restate"}
    assert RESTATE_VERSION == registry.ENGINES["restate"].pin


def test_an_unknown_engine_is_named_with_those_there_are():
    try:
        registry.engine("cadence")
    except ValueError as exc:
        assert "cadence" in str(exc) and "temporal" in str(exc)
    else:
        raise AssertionError("an unknown engine was accepted")


def test_every_engine_has_a_workload_module_with_the_four_names():
    import importlib

    for entry in registry.ENGINES.values():
        module = importlib.import_module(entry.workload)
        for name in ("make", "unavailable", "note", "recovery_note"):
            assert callable(getattr(module, name, None)), f"{entry.workload} lacks {name}()"


def test_every_integration_runs_on_its_engine_beside_one_of_its_rows():
    """A framework's integration is a benchmark row of its own on its engine's server and colour, compared with a
    row of that engine; it preloads the engine's imports and its own, and its workload has the four names."""
    import importlib

    integrations = [(e, i) for e in registry.ENGINES.values() for i in e.integrations]
    assert [i.variant for _, i in integrations] == list(registry.INTEGRATIONS)
    assert len(set(registry.INTEGRATIONS)) == len(registry.INTEGRATIONS)
    assert not set(registry.INTEGRATIONS) & set(BENCH_ROWS)
    for entry, integration in integrations:
        assert registry.engine_of_variant(integration.variant) is entry
        assert registry.integration_of_variant(integration.variant) is integration
        assert integration.beside in entry.bench, integration
        assert registry.imports_of_variant(integration.variant) == (*entry.imports, *integration.imports)
        module = importlib.import_module(integration.workload)
        for name in ("make", "unavailable", "note", "recovery_note"):
            assert callable(getattr(module, name, None)), f"{integration.workload} lacks {name}()"
    assert registry.integration_of_variant("temporal") is None and registry.engine_of_variant("floor") is None
