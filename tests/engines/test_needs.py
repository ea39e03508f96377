"""The servers a run needs: started once each, in the background when told what is coming (the demo starts them
all as it begins), the same address for every matrix that asks, all stopped at the end, an unknown one refused in
one line. The servers are faked here (no processes): the registry's own serve() is checked elsewhere."""

from __future__ import annotations

import contextlib
import threading

import pytest

from crashlab.engines import needs as needs_module


def test_prepared_servers_start_at_once_in_the_background_and_are_shared(monkeypatch, tmp_path):
    started, stopped, threads, go = [], [], set(), threading.Event()

    class FakeEngine:
        def __init__(self, name):
            self.name = name

        @contextlib.contextmanager
        def serve(self, folder, timeout):
            threads.add(threading.current_thread().name)
            go.wait(10)  # held until the test has seen prepare() return
            started.append(self.name)
            yield {f"{self.name.upper()}_ADDRESS": str(folder)}
            stopped.append(self.name)

    monkeypatch.setattr(needs_module, "engine", FakeEngine)
    with needs_module.Needs(tmp_path) as needs:
        needs.prepare([{"needs": "temporal"}, {"needs": ["restate", "temporal"]}, {}])
        assert started == []  # it returned while both were still starting
        go.set()
        env = needs.env_for({"needs": "temporal", "env": {"X": "1"}})
        assert env == {"X": "1", "TEMPORAL_ADDRESS": str(tmp_path / "temporal")}
        assert needs.env_for({"needs": ["restate"]}) == {"RESTATE_ADDRESS": str(tmp_path / "restate")}
        assert sorted(started) == ["restate", "temporal"] and all(t.startswith("needs") for t in threads)
        assert needs.env_for({"needs": "temporal"})["TEMPORAL_ADDRESS"] == env["TEMPORAL_ADDRESS"]  # the same one
        assert stopped == []
    assert sorted(stopped) == ["restate", "temporal"] and len(started) == 2


def test_an_unknown_need_is_refused_in_one_line(tmp_path):
    with needs_module.Needs(tmp_path) as needs, pytest.raises(ValueError, match="unknown need 'cadence'"):
        needs.prepare([{"needs": "cadence"}])


def test_a_folder_an_earlier_run_left_full_is_not_reused(monkeypatch, tmp_path):
    """A run killed before it stopped its servers leaves their folders full, and a server refuses a folder that
    holds data: the next run takes a fresh one beside it, and leaves the old one alone."""
    class FakeEngine:
        def __init__(self, name):
            self.name = name

        @contextlib.contextmanager
        def serve(self, folder, timeout):
            assert not folder.exists() or not any(folder.iterdir()), f"{folder} is not empty"
            yield {"RESTATE_ADDRESS": str(folder)}

    (tmp_path / "restate" / "data").mkdir(parents=True)
    (tmp_path / "restate-1").mkdir()  # empty: usable
    monkeypatch.setattr(needs_module, "engine", FakeEngine)
    with needs_module.Needs(tmp_path) as needs:
        assert needs.env_for({"needs": "restate"}) == {"RESTATE_ADDRESS": str(tmp_path / "restate-1")}
    assert (tmp_path / "restate" / "data").is_dir()
