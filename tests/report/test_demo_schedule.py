"""How the demo schedules its matrices, with the crash tests faked (no processes, no world): two at a time, the
longest expected first, yielded in the lessons' order whatever order they finish in, each agent given its engine's
imports to preload when its spec names none, and the servers any of them needs started before the first waits."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from crashlab.engines.registry import ENGINES
from crashlab.report import demo

FILES = {
    "graph_agent.py": "import steps\nfrom crashlab.agent import agent_main\n",
    "steps.py": "from langgraph.graph import StateGraph\n",
    "plain_agent.py": "import json\nfrom crashlab.agent import agent_main\n",
    "dbos_agent.py": "from dbos import DBOS\n",
}


class NoServers:
    """crashlab.engines.needs.Needs for agents that need no server."""

    def __init__(self, folder):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def prepare(self, specs):
        pass

    def env_for(self, spec):
        return {}


def test_an_agent_preloads_the_engines_it_imports_and_nothing_else():
    assert demo.engine_preload("graph_agent.py", FILES) == ENGINES["langgraph"].imports  # through its own module
    assert demo.engine_preload("dbos_agent.py", FILES) == ENGINES["dbos"].imports
    assert demo.engine_preload("plain_agent.py", FILES) == ()
    assert demo.engine_preload("broken.py", {"broken.py": "import (\n"}) == ()


def test_matrices_run_two_at_once_longest_first_and_come_back_in_the_lessons_order(monkeypatch, tmp_path):
    specs = [("01_a", {"agent": "plain_agent.py", "expect": "observe", "title": "a"}),
             ("02_b", {"agent": "graph_agent.py", "title": "b"}),
             ("03_c", {"agent": "dbos_agent.py", "preload": ["dbos"], "needs": "temporal", "title": "c"}),
             ("03_c", {"agent": "dbos_agent.py", "resumers": 2, "title": "d"})]
    monkeypatch.setattr(demo, "reference_agents", lambda solutions: [(Path(f"{m}.ipynb"), s) for m, s in specs])
    monkeypatch.setattr(demo.nbformat, "read", lambda path, as_version: None)
    monkeypatch.setattr(demo, "written_files", lambda nb: FILES)
    prepared, started, running, most = [], [], [], [0]
    lock = threading.Lock()

    class FakeNeeds(NoServers):
        def prepare(self, specs):
            prepared.extend(spec.get("needs") for spec in specs if spec.get("needs"))

    def fake_crash_test(agent, options, **kwargs):
        with lock:
            started.append((Path(agent).name, options.preload))
            running.append(agent)
            most[0] = max(most[0], len(running))
        time.sleep(0.2)
        with lock:
            running.remove(agent)
        return f"matrix of {Path(agent).name}"

    import crashlab.engines.needs

    monkeypatch.setattr(crashlab.engines.needs, "Needs", FakeNeeds)
    monkeypatch.setattr(demo, "crash_test", fake_crash_test)
    got = list(demo.reference_matrices(solutions=tmp_path, parallel=2, verbose=False, progress=False))
    assert [(lesson, spec["title"]) for lesson, spec, _ in got] == [(m, s["title"]) for m, s in specs]
    assert [matrix for _, _, matrix in got] == [f"matrix of {s['agent']}" for _, s in specs]
    assert most[0] == 2 and prepared == ["temporal"]
    # the one with a server to wait on, first; its launcher preloads what it names and what its server's engine imports
    assert started[0] == ("dbos_agent.py", ("dbos", *ENGINES["temporal"].imports))
    assert ("graph_agent.py", ENGINES["langgraph"].imports) in started and ("plain_agent.py", ()) in started


# --- a machine too loaded to judge on -------------------------------------------------------------------------------
def fake_matrix(agent: str, expect: str, points: list[str], failing: set[str]):
    from crashlab.harness import BASELINE, Matrix, Row

    rows = [Row(point, True, {"charge": 1}, 0, 4 + (point in failing), int(point in failing), True, 0.5,
                [f"{point}: 1 avoidable repeated model call"] if point in failing else [], [], [])
            for point in [BASELINE, *points]]
    return Matrix(str(agent), "ORD-8842", expect, rows, 1.0)


@pytest.mark.parametrize("case", ["held when re-run alone", "still loaded", "quiet", "failed on a quiet machine"])
def test_a_durable_agent_failing_on_a_loaded_machine_is_run_again_alone_and_never_failed_for_load(case, monkeypatch,
                                                                                               tmp_path, capsys):
    """The load the demo sees is faked (the one-minute load average), and so are the matrices: the durable agent's
    two timing-sensitive points fail in the first run; what it says after depends on the re-run and the load."""
    specs = [("01_a", {"agent": "plain_agent.py", "expect": "observe", "title": "naive"}),
             ("08_b", {"agent": "graph_agent.py", "expect": "durable", "title": "durable"})]
    monkeypatch.setattr(demo, "reference_agents", lambda solutions: [(Path(f"{m}.ipynb"), s) for m, s in specs])
    monkeypatch.setattr(demo.nbformat, "read", lambda path, as_version: None)
    monkeypatch.setattr(demo, "written_files", lambda nb: FILES)
    cpus = os.cpu_count() or 1
    busy, quiet = demo.LOADED_PER_CPU * cpus + 1, 0.5
    loads = {"held when re-run alone": (busy, busy), "still loaded": (busy, busy), "quiet": (quiet, quiet),
             "failed on a quiet machine": (busy, quiet)}[case]
    phase = {"n": 0}
    monkeypatch.setattr(demo, "_load_average", lambda: loads[min(phase["n"], 1)])
    calls = []

    def fake_crash_test(agent, options, **kwargs):
        points = options.points
        calls.append((Path(agent).name, points))
        if Path(agent).name == "plain_agent.py":
            return fake_matrix(agent, "observe", ["after:model#1"], {"after:model#1"})
        if points == "all":
            phase["n"] = 1  # the load from here on: the re-run's
            return fake_matrix(agent, "durable", ["after:model#1", "after:model#2", "after:charge_card"],
                               {"after:model#1", "after:model#2"})
        phase["n"] = 1
        return fake_matrix(agent, "durable", points, set() if case == "held when re-run alone" else set(points))

    import crashlab.engines.needs

    monkeypatch.setattr(crashlab.engines.needs, "Needs", NoServers)
    monkeypatch.setattr(demo, "crash_test", fake_crash_test)
    monkeypatch.chdir(tmp_path)
    code = demo.run_demo(solutions=tmp_path, html_out=None)
    said = capsys.readouterr().out
    reruns = [points for name, points in calls if name == "graph_agent.py" and points != "all"]
    headline = re.sub(r"\s+", " ", said.strip().split("\n\n")[-2])
    if case == "quiet":  # failed on a quiet machine: a failure, not run again
        assert reruns == [] and code == 1 and "FAILED: graph_agent.py" in headline, said
        return
    assert reruns == [["after:model#1", "after:model#2"]], calls
    assert "run again, alone" in said and "re-run alone" in said
    if case == "held when re-run alone":
        assert code == 0 and "1 of 1 durable agent held at every crash point" in headline, said
        assert "08 durable: after:model#1, after:model#2: failed in the loaded run, load average up to" in said, said
        assert "and held when run again alone" in said, said
        assert "FAILED" not in said and "could not" not in said
    elif case == "still loaded":
        assert code == 1 and "FAILED" not in said and "not judged: too loaded" in said, said
        assert "0 of 1 durable agent held at every crash point; 1 could not be judged (graph_agent.py): the machine " \
               "was too loaded" in headline, said
    else:  # loaded at first, quiet for the re-run, and it failed again: a real failure
        assert code == 1 and "FAILED: graph_agent.py" in headline and "could not" not in said, said


# --- a section beside the matrices (the long agents' rows) ----------------------------------------------------------
@pytest.mark.parametrize("fails", [False, True])
def test_a_section_beside_the_matrices_is_printed_after_them_and_its_failure_is_one_line(fails, monkeypatch, tmp_path,
                                                                                        capsys):
    """What runs beside the matrices (the CLI passes the long agents' rows) is printed after the summary; when it
    fails, the demo says so in one line and the matrices' verdict stands."""
    specs = [("08_b", {"agent": "graph_agent.py", "expect": "durable", "title": "durable"})]
    monkeypatch.setattr(demo, "reference_agents", lambda solutions: [(Path(f"{m}.ipynb"), s) for m, s in specs])
    monkeypatch.setattr(demo.nbformat, "read", lambda path, as_version: None)
    monkeypatch.setattr(demo, "written_files", lambda nb: FILES)
    monkeypatch.setattr(demo, "_load_average", lambda: 0.5)
    import crashlab.engines.needs

    monkeypatch.setattr(crashlab.engines.needs, "Needs", NoServers)
    monkeypatch.setattr(demo, "crash_test",
                        lambda agent, options, **kwargs: fake_matrix(agent, "durable", ["after:model#1"], set()))
    monkeypatch.chdir(tmp_path)

    def beside():
        if fails:
            raise RuntimeError("the Temporal server did not start")
        return "The long agent", "long agent  exponent\nlanggraph-sync  1.92"

    code = demo.run_demo(solutions=tmp_path, html_out=None, beside=beside)
    said = capsys.readouterr().out
    assert code == 0, said
    summary_at = said.index("held at every crash point")
    if fails:
        line = next(line for line in said.splitlines() if "beside the matrices failed" in line)
        assert line.startswith("error:") and "the Temporal server did not start" in line and "Traceback" not in said
    else:
        assert said.index("== The long agent ==") > summary_at and "langgraph-sync  1.92" in said


def test_an_agent_with_points_of_its_own_runs_at_them_and_is_left_out_of_a_run_at_common_points(monkeypatch):
    """Lesson 10's streaming agents list their points (inside a stream): the demo runs them there; lesson 11's run of
    every order agent at four common points leaves them out rather than crash them where nothing streams."""
    own = ["mid:model#1@chunk2", "mid:model#4@chunk6"]
    specs = [("01_a", {"agent": "plain_agent.py", "expect": "durable", "title": "a"}),
             ("10_s", {"agent": "dbos_agent.py", "expect": "durable", "title": "s", "crash_points": own})]
    monkeypatch.setattr(demo, "reference_agents", lambda solutions: [(Path(f"{m}.ipynb"), s) for m, s in specs])
    monkeypatch.setattr(demo.nbformat, "read", lambda path, as_version: None)
    monkeypatch.setattr(demo, "written_files", lambda nb: FILES)
    import crashlab.engines.needs

    monkeypatch.setattr(crashlab.engines.needs, "Needs", NoServers)
    monkeypatch.setattr(demo, "crash_test", lambda agent, options, **kwargs: (Path(agent).name, options.points))
    everything = [matrix for _, _, matrix in demo.reference_matrices(solutions=Path("."), verbose=False)]
    assert everything == [("plain_agent.py", "all"), ("dbos_agent.py", own)]
    common = [matrix for _, _, matrix in demo.reference_matrices(["after:model#2"], solutions=Path("."), verbose=False)]
    assert common == [("plain_agent.py", ["after:model#2"])]
