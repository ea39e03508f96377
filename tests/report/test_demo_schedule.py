"""How the demo schedules its matrices, with the crash tests faked (no processes, no world): two at a time, the
longest expected first, yielded in the lessons' order whatever order they finish in, each agent given its engine's
imports to preload when its spec names none, and the servers any of them needs started before the first waits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from crashlab.engines.registry import ENGINES
from crashlab.report import demo

FILES = {
    "graph_agent.py": "import steps\nfrom crashlab.agent import agent_main\n",
    "steps.py": "from langgraph.graph import StateGraph\n",
    "plain_agent.py": "import json\nfrom crashlab.agent import agent_main\n",
    "dbos_agent.py": "from dbos import DBOS\n",
}


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

    class FakeNeeds:
        def __init__(self, folder):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def prepare(self, specs):
            prepared.extend(spec.get("needs") for spec in specs if spec.get("needs"))

        def env_for(self, spec):
            return {}

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
