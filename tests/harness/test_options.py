"""A matrix named in a master's metadata runs with one set of defaults, whoever runs it (the grader, the demo)."""

import pytest

from crashlab.engines.registry import ENGINES
from crashlab.harness import MatrixOptions, double_crash_pairs


def test_an_empty_spec_gets_crash_tests_defaults():
    options = MatrixOptions.from_spec({})
    assert options == MatrixOptions() and options.points == "all" and options.expect == "durable"
    assert (options.jobs, options.timeout, options.resumers, options.launcher, options.preload) == (2, 60.0, 1, "warm", ())
    assert options.double is None and options.faults is None and options.fail is None


def test_a_spec_names_its_options_as_the_types_crash_test_takes():
    spec = {"crash_points": ["after:charge_card"], "expect": "no-repeats", "jobs": "3", "timeout": 90,
            "resumers": 2, "double": [["after:model#1", "after:charge_card"]], "faults": [["lost_ack:charge_card", 1]],
            "preload": ["dbos"], "fail": "reserve_item"}
    options = MatrixOptions.from_spec(spec)
    assert options.points == ["after:charge_card"] and options.expect == "no-repeats"
    assert options.jobs == 3 and options.timeout == 90.0 and options.resumers == 2
    assert options.double == [("after:model#1", "after:charge_card")]
    assert options.faults == [("lost_ack:charge_card", 1, None)]  # an arg left out is None, as World.inject takes it
    assert options.preload == ("dbos",) and options.fail == "reserve_item"
    assert options.but(jobs=1).jobs == 1 and options.jobs == 3


def test_a_number_of_double_crashes_is_that_many_pairs_of_the_specs_path():
    assert MatrixOptions.from_spec({"double": 4}).double == double_crash_pairs(4)
    assert MatrixOptions.from_spec({"double": 3, "fail": "reserve_item"}).double == \
        double_crash_pairs(3, fail="reserve_item")


def test_a_spec_that_needs_a_server_preloads_its_engines_imports_after_its_own():
    options = MatrixOptions.from_spec({"needs": "temporal", "preload": ["anthropic"]})
    assert options.preload == ("anthropic", *ENGINES["temporal"].imports)
    with pytest.raises(ValueError, match="unknown need 'cadence'"):
        MatrixOptions.from_spec({"needs": ["cadence"]})
