"""A warm launcher reaps its own children, so the harness can hear of an agent's exit after the system has given
its id to another process. A kill given the agent's start time signals nothing once the id names a process
that started at another time; the process the id still names is killed as before."""

import subprocess

from crashlab.plumbing.processes import GONE_AT_START, born_of, kill_group, kill_tree, still_ours


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_a_kill_for_another_start_time_leaves_the_process_that_now_has_the_id():
    process = _sleeper()
    try:
        born = born_of(process.pid)
        assert born != GONE_AT_START and still_ours(process.pid, born)
        assert not still_ours(process.pid, born + 1)
        kill_tree(process.pid, born + 1)
        kill_group(process.pid, born + 1)
        assert process.poll() is None, "a kill for another start time signalled the process that has the id"
        kill_tree(process.pid, born)
        assert process.wait(30) == -9
    finally:
        process.kill()
        process.wait()


def test_a_process_gone_at_start_is_ours_only_while_nothing_has_its_id():
    process = _sleeper()
    process.kill()
    process.wait()
    assert born_of(process.pid) == GONE_AT_START
    assert still_ours(process.pid, GONE_AT_START)  # nothing has the id: a group signal reaches only ours
    other = _sleeper()
    try:
        assert not still_ours(other.pid, GONE_AT_START)
    finally:
        other.kill()
        other.wait()
