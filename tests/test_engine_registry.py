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
