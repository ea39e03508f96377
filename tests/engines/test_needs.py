"""The servers a run needs: started once each, in the background when told what is coming (the demo starts them
all as it begins), the same address for every matrix that asks, all stopped at the end, an unknown one refused in
one line. The servers are faked here (no processes): the registry's own serve() is checked elsewhere."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from crashlab.engines import needs as needs_module


def test_prepared_servers_start_at_once_in_the_background_and_are_shared(monkeypatch, tmp_path):
    started, stopped, threads = [], [], set()

    class FakeEngine:
        def __init__(self, name):
            self.name = name

        @contextlib.contextmanager
        def serve(self, folder, timeout):
            threads.add(threading.current_thread().name)
            time.sleep(0.2)
            started.append(self.name)
            yield {f"{self.name.upper()}_ADDRESS": str(folder)}
            stopped.append(self.name)

    monkeypatch.setattr(needs_module, "engine", FakeEngine)
    with needs_module.Needs(tmp_path) as needs:
        t0 = time.monotonic()
        needs.prepare([{"needs": "temporal"}, {"needs": ["restate", "temporal"]}, {}])
        assert time.monotonic() - t0 < 0.15  # it returned before either had started
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
