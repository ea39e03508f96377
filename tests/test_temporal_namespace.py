"""The Temporal namespace of a world is chosen once, even when its agents all start at the same moment.

No server is needed: choosing the name (``namespace_for``) is apart from registering it with Temporal.
"""

from __future__ import annotations

import threading

from crashlab.engines.temporal import NAMESPACE_FILE, namespace_for

AGENTS = 8


def choose_at_once(state_dir, agents: int = AGENTS) -> tuple[list[str], list[BaseException]]:
    """``agents`` threads released together, each choosing the namespace of a fresh world."""
    start = threading.Barrier(agents)
    names: list[str] = []
    errors: list[BaseException] = []

    def agent():
        start.wait()
        try:
            names.append(namespace_for(state_dir))
        except BaseException as exc:  # noqa: BLE001 -- a traceback in an agent is what this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=agent) for _ in range(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return names, errors


def test_agents_that_start_together_on_a_fresh_world_share_one_namespace(tmp_path):
    for trial in range(20):
        state_dir = tmp_path / f"world-{trial}" / "agent"  # not even made yet, as on a fresh world
        names, errors = choose_at_once(state_dir)
        assert errors == [], f"trial {trial}: {errors[:1]}"
        assert len(names) == AGENTS and len(set(names)) == 1, f"trial {trial}: {sorted(set(names))}"
        assert (state_dir / NAMESPACE_FILE).read_text() == names[0] + "\n"
        assert sorted(p.name for p in state_dir.iterdir()) == [NAMESPACE_FILE, NAMESPACE_FILE + ".lock"]


def test_the_namespace_is_remembered_and_each_world_has_its_own(tmp_path):
    first = namespace_for(tmp_path / "a")
    assert namespace_for(tmp_path / "a") == first  # a resumed process finds the same one
    assert namespace_for(tmp_path / "b") != first
    assert first.startswith("crashlab-")
