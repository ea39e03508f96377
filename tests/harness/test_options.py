"""A matrix named in a master's metadata runs with one set of defaults, whoever runs it (the grader, the demo)."""

from crashlab.harness import MatrixOptions


def test_an_empty_spec_gets_crash_tests_defaults():
    options = MatrixOptions.from_spec({})
    assert options.points == "all" and options.expect == "durable" and options.resumers == 1
    assert options.crash_test_kwargs() == {"expect": "durable", "jobs": 2, "timeout": 60.0, "resumers": 1,
                                           "double": None, "faults": None, "launcher": "warm", "preload": (),
                                           "fail": None}


def test_a_spec_names_its_options_as_the_types_crash_test_takes():
    spec = {"crash_points": ["after:charge_card"], "expect": "no-repeats", "jobs": "3", "timeout": 90,
            "resumers": 2, "double": [["after:model#1", "after:charge_card"]], "faults": [["lost_ack:charge_card", 1]],
            "preload": ["dbos"], "fail": "reserve_item"}
    options = MatrixOptions.from_spec(spec)
    kwargs = options.crash_test_kwargs()
    assert options.points == ["after:charge_card"]
    assert kwargs["jobs"] == 3 and kwargs["timeout"] == 90.0 and kwargs["resumers"] == 2
    assert kwargs["double"] == [("after:model#1", "after:charge_card")] and kwargs["faults"] == [("lost_ack:charge_card", 1)]
    assert kwargs["preload"] == ("dbos",) and kwargs["fail"] == "reserve_item"
    assert options.but(jobs=1).crash_test_kwargs()["jobs"] == 1 and options.jobs == 3
