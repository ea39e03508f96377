"""A crash point is reached by the run, for its order: decoys spend nothing, and a crash takes the whole run.

A non-durable agent used to fork a child in a session of its own that sent one throwaway request per crash point
for another order: the world killed the child, recorded the point as reached, and the real run never met it
(lesson 1 at full marks). The counted faults were used up the same way. Here: the world fires a point only for
the armed order and a request from the run's own processes (marked from outside: a cgroup, the crash user's
uid, or the process tree where neither can be had), the kill takes every process of the run, a point counts only
when the run's first process died of it, and counted faults armed for an order are that order's.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import nbformat
import pytest

from crashlab.world import runscope
from crashlab.grading.grade import grade_notebook, score_matrix_check
from crashlab.course.notebooks import grade_id
from master_files import matrix_check, write_master_files
from crashlab.harness import BASELINE, crash_row, run_agent
from crashlab.world.runscope import RunScope
from crashlab.plumbing.sandbox_slot import SandboxSlot
from crashlab.world import World, WorldError

ROOT = Path(__file__).resolve().parents[2]
LESSON1 = "01_naive_event_log.ipynb"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="isolation and cgroups need root (CI grades as root)")
OTHER = "ORD-9001"

DECOY_AGENT = '''"""Not durable: a decoy child, in a session of its own, first spends every crash point on another order."""
import os, signal, time
from crashlab.agent import (MAX_TOKENS, MODEL, TOOLS, agent_main, call_tool, content_to_dicts, first_tool_use,
                            model_client, order_task, tool_result_message)

DECOY = """
from crashlab.agent import MAX_TOKENS, MODEL, TOOLS, call_tool, model_client, order_task
other = "ORD-9001"
for _ in range(4):
    try:
        model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS,
                                       messages=[{"role": "user", "content": order_task(other)}])
    except Exception:
        pass
for name, args in (("charge_card", {"order_id": other, "amount": 1.0}),
                   ("reserve_item", {"order_id": other, "sku": "SKU-1"}), ("send_confirmation", {"order_id": other})):
    try:
        call_tool(name, args)
    except Exception:
        pass
"""


def decoy_killed():
    """The decoy as a forked child (no interpreter to start: a row runs it twice), in a session of its own."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            exec(DECOY, {})
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def run(order_id):
    if decoy_killed():  # the decoy took the crash: wait to be ended, having done nothing
        time.sleep(60)
    messages = [{"role": "user", "content": order_task(order_id)}]
    client = model_client()
    for _ in range(10):
        reply = client.messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS, messages=messages)
        content = content_to_dicts(reply.content)
        if reply.stop_reason != "tool_use":
            return
        call = first_tool_use(content)
        messages += [{"role": "assistant", "content": content},
                     tool_result_message(call["id"], call_tool(call["name"], call["input"]))]


if __name__ == "__main__":
    agent_main(run)
'''


def lesson1_with_decoy() -> nbformat.NotebookNode:
    """The student notebook of lesson 1 with the master's answers to exercises 1 and 2 (6 honest points) and
    the decoy agent as exercise 3."""
    master = {grade_id(c): c.source for c in nbformat.read(ROOT / "solutions" / LESSON1, as_version=4).cells}
    nb = nbformat.read(ROOT / "course" / LESSON1, as_version=4)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in ("ex1_read_events", "ex2_rebuild"):
            cell.source = master[gid]
        elif gid == "ex3_logged_agent":
            cell.source = "%%writefile logged_agent.py\n" + DECOY_AGENT
    return nb


@pytest.mark.parametrize("isolate", [pytest.param(True, marks=ROOT_ONLY), False], ids=["isolated", "not-isolated"])
def test_a_decoy_that_spends_the_crash_points_on_another_order_scores_only_its_honest_points(tmp_path, isolate):
    path = tmp_path / LESSON1
    nbformat.write(lesson1_with_decoy(), path)
    report = grade_notebook(path, isolate=isolate)
    by_name = {test.name: test for test in report.tests}
    assert by_name["ex1_read_events_checks"].score == 3 and by_name["ex2_rebuild_checks"].score == 3, str(report)
    assert report.score <= 6, str(report)
    assert by_name["ex3_crash_matrix"].score == 0, by_name["ex3_crash_matrix"].output


# --- counted faults are the order's --------------------------------------------------------------------------
def test_a_fault_armed_for_an_order_is_not_used_up_by_requests_for_another(tmp_path):
    charge = {"order_id": "ORD-8842", "amount": 49.99}
    with World.start(tmp_path / "w") as world:
        world.inject("lost_ack:charge_card", order_id="ORD-8842")
        world.inject("refuse:reserve_item", times=1, arg="503")  # any order's, as lessons arm them
        other = httpx.post(world.url + "/payments/charges", json={**charge, "order_id": OTHER}, timeout=10)
        assert other.status_code == 200
        assert world.faults_left() == {"lost_ack:charge_card@ORD-8842": 1, "refuse:reserve_item": 1}
        with pytest.raises(httpx.HTTPError):  # the order's own request meets it: committed, no reply
            httpx.post(world.url + "/payments/charges", json=charge, timeout=10)
        assert world.audit().counts["charge"] == 1
        refused = httpx.post(world.url + "/inventory/reservations", json={"order_id": OTHER, "sku": "SKU-1"}, timeout=10)
        assert refused.status_code == 503
        assert world.faults_left() == {"lost_ack:charge_card@ORD-8842": 0, "refuse:reserve_item": 0}
        with pytest.raises(ValueError, match="order id"):
            world.inject("lost_ack:charge_card", order_id="8842")


def test_a_malformed_reply_armed_for_an_order_answers_that_orders_conversation_only(tmp_path):
    from crashlab.order import TOOLS, order_task

    def ask(order_id):
        reply = httpx.post(world.url + "/v1/messages", timeout=10, json={
            "model": "m", "max_tokens": 100, "tools": TOOLS,
            "messages": [{"role": "user", "content": order_task(order_id)}]}).json()
        return next(b["name"] for b in reply["content"] if b["type"] == "tool_use")

    with World.start(tmp_path / "w") as world:
        world.inject("malformed_reply", arg="unknown_tool", order_id="ORD-8842")
        assert ask(OTHER) == "charge_card"
        assert ask("ORD-8842") == "refund_card"


FAULT_DECOY_AGENT = '''import subprocess, sys
from crashlab.agent import ToolCallFailed, agent_main, call_tool

DECOY = """
from crashlab.agent import call_tool
for _ in range(3):
    try:
        call_tool("charge_card", {"order_id": "ORD-9001", "amount": 1.0})
    except Exception:
        pass
"""

def run(order_id):
    subprocess.run([sys.executable, "-c", DECOY], start_new_session=True)
    try:
        call_tool("charge_card", {"order_id": order_id, "amount": 49.99})
        print("the charge was acknowledged")
    except ToolCallFailed as exc:
        print(f"no reply to the charge: {exc}")

if __name__ == "__main__":
    agent_main(run)
'''


def test_a_decoy_does_not_use_up_the_faults_of_a_matrix_row(tmp_path):
    """A row's faults are armed for the order under test: a decoy's requests for another order leave them."""
    agent = tmp_path / "fault_decoy_agent.py"
    agent.write_text(FAULT_DECOY_AGENT)
    row = crash_row(agent, BASELINE, expect="observe", workdir=tmp_path, faults=[("lost_ack:charge_card", 1, None)])
    [run] = row.runs
    assert "no reply to the charge" in run.stdout, (run.stdout, run.stderr)
    assert row.effects["charge"] == 1  # the order's charge, committed though its reply was lost


# --- only the run's own requests meet the point, and only the run's death counts -------------------------------
def test_a_request_from_outside_the_run_does_not_meet_the_point(tmp_path):
    """Armed for a run (here a process that sends nothing), the point ignores a request for the right order
    from a process outside that run."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        with World.start(tmp_path / "w") as world:
            world.arm_crash("before:charge_card", "ORD-8842", RunScope(leader=bystander.pid))
            reply = httpx.post(world.url + "/payments/charges", json={"order_id": "ORD-8842", "amount": 49.99},
                               timeout=20)
            assert reply.status_code == 200 and world.crash_reached() is None
            assert bystander.poll() is None, "the world killed a process that never asked"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_crash_point_is_armed_for_an_order_and_a_run_or_refused(tmp_path):
    with World.start(tmp_path / "w") as world:
        with pytest.raises(ValueError, match="needs the run"):
            world.arm_crash("before:charge_card")
        with pytest.raises(ValueError, match="order id"):
            world.arm_crash("before:charge_card", "8842", RunScope(leader=1))
        with pytest.raises(WorldError, match="crashlab-runs"):
            world.arm_crash("before:charge_card", "ORD-8842", RunScope(cgroup="/sys/fs/cgroup"))
        with pytest.raises(WorldError, match="positive integer"):
            world.arm_crash("before:charge_card", "ORD-8842", RunScope(uid=-3))


LEFT_BEHIND_AGENT = '''"""Its first process ends at once; a child it left behind reaches the point for the order afterwards."""
import json, os, subprocess, sys, time, urllib.request

if "--left-behind" in sys.argv:
    while os.getppid() == int(sys.argv[-1]):  # until the first process has exited
        time.sleep(0.005)
    body = json.dumps({"order_id": "ORD-8842", "amount": 49.99}).encode()
    request = urllib.request.Request(os.environ["CRASHLAB_SERVICES_URL"] + "/payments/charges", body,
                                     {"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=20)
else:  # the child stays in the run's session: every kind of run mark covers it
    subprocess.Popen([sys.executable, __file__, "--left-behind", str(os.getpid())])
'''


def test_a_point_reached_by_a_process_left_behind_after_the_run_ended_does_not_count(tmp_path):
    """The child holds the run's output pipes, so the harness is still reading them when it asks: the world
    sees the point, but the run's first process had exited -- no crash of the run, and the row says so."""
    agent = tmp_path / "left_behind_agent.py"
    agent.write_text(LEFT_BEHIND_AGENT)
    row = crash_row(agent, "before:charge_card", expect="observe", workdir=tmp_path, launcher="exec")
    assert not row.reached
    [problem] = row.problems
    assert "never reached" in problem and "left behind" in problem and "exited with code 0" in problem, problem


# --- the kill takes the whole run ------------------------------------------------------------------------------
FAMILY_AGENT = '''"""Before it reaches the point, the run starts processes in sessions of their own: a child that stays with
its own setsid'd child, and (with ORPHANS) a child that leaves its setsid'd child an orphan. Each watches the
first process and, should it outlive it, writes down that it survived the crash."""
import os, subprocess, sys, time
from crashlab.agent import agent_main, call_tool, state_dir

def note(name, text=""):
    with open(state_dir() / name, "a") as f:
        f.write(text)

def spawn(*args):
    return subprocess.Popen([sys.executable, __file__, *args], start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

if "--helper" in sys.argv:
    mode, leader = sys.argv[-2], int(sys.argv[-1])
    note("pids", f"{os.getpid()}\\n")
    if mode in ("stays", "leaves"):
        spawn("--helper", "watch", str(leader))
        if mode == "leaves":
            sys.exit(0)
    def leader_alive():
        try:
            return open(f"/proc/{leader}/stat").read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            return False
    while leader_alive():
        time.sleep(0.002)
    note(f"survived-{os.getpid()}")
    time.sleep(60)
else:
    def run(order_id):
        family = ["stays"] + (["leaves"] if os.environ.get("ORPHANS") else [])
        for mode in family:
            spawn("--helper", mode, str(os.getpid()))
        def started():
            pids = state_dir() / "pids"
            return len(pids.read_text().split()) if pids.exists() else 0
        deadline = time.time() + 30
        while started() < 2 * len(family) and time.time() < deadline:
            time.sleep(0.01)
        call_tool("charge_card", {"order_id": order_id, "amount": 49.99})
        call_tool("reserve_item", {"order_id": order_id, "sku": "SKU-772"})

    agent_main(run)
'''


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.parametrize("isolated, cgroup", [pytest.param(True, True, marks=ROOT_ONLY),
                                              pytest.param(True, False, marks=ROOT_ONLY),
                                              pytest.param(False, True, marks=ROOT_ONLY),
                                              (False, False)],
                         ids=["crash-user-and-cgroup", "crash-user", "cgroup", "process-tree"])
def test_the_crash_kills_the_whole_run_whatever_session_its_processes_moved_to(monkeypatch, isolated, cgroup):
    if not cgroup:
        monkeypatch.setattr(runscope, "make_cgroup", lambda: None)
    elif runscope.make_cgroup() is None:
        pytest.skip("no writable cgroup v2 hierarchy with cgroup.kill here")
    # A process-tree run loses an orphan that left its session (init adopts it): it is not asked of that mark.
    orphans = isolated or cgroup
    folder = Path(tempfile.mkdtemp(prefix="crashlab-identity-"))
    survivors: list[int] = []
    try:
        (folder / "family_agent.py").write_text(FAMILY_AGENT)
        with SandboxSlot(folder / "home") if isolated else contextlib.nullcontext() as sandbox:
            if sandbox is not None:
                sandbox.own(folder)
                os.chmod(folder, 0o770)
                for name, value in sandbox.env({}).items():  # as the grader's process is set up
                    monkeypatch.setenv(name, value)
            with World.start(folder / "world") as world:
                run = run_agent(folder / "family_agent.py", world, crash_at="before:charge_card", timeout=60,
                                extra_env={"ORPHANS": "1"} if orphans else None)
                assert run.crashed_at == "before:charge_card" and run.killed, (run.crash_note, run.stderr)
                pids = [int(p) for p in (world.agent_dir / "pids").read_text().split()]
                assert len(pids) == (4 if orphans else 2)
                # SIGKILL is sent at once but takes effect when the process is next scheduled: on a loaded machine
                # a killed process can still be listed as running for a moment (it runs none of its code again).
                deadline = time.monotonic() + 10
                while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
                    time.sleep(0.05)
                survivors = [pid for pid in pids if alive(pid)]
                assert not survivors, "processes of the crashed run outlived it"
                if orphans:  # killed at once with the first process: none saw it die
                    assert not list(world.agent_dir.glob("survived-*"))
                assert world.audit().counts["charge"] == 0
    finally:
        for pid in survivors:
            os.kill(pid, 9)
        subprocess.run(["rm", "-rf", str(folder)])


def test_a_run_scope_refuses_what_is_not_a_run():
    for bad, why in (([], "a run is"), ({"pid": 3}, "a run is"), ({"uid": "0"}, "positive integer"),
                     ({"leader": True}, "positive integer"), ({"cgroup": "relative/run-1"}, "crashlab-runs")):
        with pytest.raises(ValueError, match=why):
            RunScope.from_json(bad)
    assert RunScope.from_json({"uid": 1234}) == RunScope(uid=1234)
    assert not RunScope(leader=None).members() and not RunScope().holds({os.getpid()})


def test_where_no_holder_can_be_seen_only_a_crash_users_own_connection_is_the_runs():
    """Root without CAP_SYS_PTRACE (a container's default) reads no other user's /proc/PID/fd: the world then tells a
    crashed run's request by the uid the kernel recorded for the connection's client end, and only for a run marked
    by a crash user of its own."""
    import socket

    from crashlab.world.crashes import Requester

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    try:
        requester = Requester(client.getsockname()[1], server.getsockname()[1])
        assert requester.owners == {os.geteuid()} and os.getpid() in requester.pids
    finally:
        client.close()
        server.close()
    assert RunScope(uid=4321).made({4321})
    assert not RunScope(uid=4321).made({4321, 0}), "a connection some other user made too is not the run's"
    assert not RunScope(uid=4321).made(set()) and not RunScope(uid=4321).made({1234})
    assert not RunScope(leader=4321).made({4321}), "a run marked by its tree alone needs its holders"


# --- the same decoy in lesson 7's compensation, which the locked agent imports ---------------------------------
UNKEYED_UNDO = '''%%writefile undo.py
"""Compensations without a key: a crash after one, then a resume, undoes twice.{decoy_doc}"""
import os, signal, subprocess, sys, time

from crashlab.agent import ToolCallFailed, call_tool
from undo_requests import undo_args

DECOY = """
from crashlab.agent import MAX_TOKENS, MODEL, TOOLS_WITH_UNDO, call_tool, model_client, order_task
other = "ORD-9001"
for _ in range(6):
    try:
        model_client().messages.create(model=MODEL, max_tokens=MAX_TOKENS, tools=TOOLS_WITH_UNDO,
                                       messages=[{{"role": "user", "content": order_task(other)}}])
    except Exception:
        pass
for name, args in (("charge_card", {{"order_id": other, "amount": 1.0}}), ("reserve_item", {{"order_id": other, "sku": "SKU-1"}}),
                   ("send_confirmation", {{"order_id": other}}), ("refund_charge", {{"order_id": other, "amount": 1.0}}),
                   ("release_item", {{"order_id": other, "sku": "SKU-1"}}), ("send_cancellation", {{"order_id": other}})):
    try:
        call_tool(name, args)
    except Exception:
        pass
"""
if {with_decoy} and "--order" in sys.argv:  # only in an agent run: a decoy spends the crash points first
    decoy = subprocess.run([sys.executable, "-c", DECOY], start_new_session=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if decoy.returncode == -signal.SIGKILL:
        time.sleep(60)


def undo_key(order_id: str, step: str) -> str:
    return f"{{order_id}}:undo:{{step}}"


def compensate(order_id: str, step: str, attempts: int = 5) -> dict:
    for attempt in range(attempts):
        try:
            return call_tool(step, undo_args(order_id, step))
        except ToolCallFailed as exc:
            if not exc.retryable or attempt == attempts - 1:
                raise
            time.sleep(0.05 * 2 ** attempt)
    raise AssertionError("unreachable")
'''

LESSON7 = "07_compensation.ipynb"


def lesson7_matrix(tmp_path: Path, with_decoy: bool):
    """Exercise 1's graded matrix (the compensating agent, which imports ``undo.py``) on the master's files with
    the unkeyed undo, at the point where a resume refunds again: what the grader scores there for that exercise,
    without running the rest of the notebook."""
    folder = tmp_path / ("decoy" if with_decoy else "honest")
    folder.mkdir()
    nb = write_master_files(ROOT / "solutions" / LESSON7, folder)
    (folder / "undo.py").write_text(UNKEYED_UNDO.split("\n", 1)[1].format(
        with_decoy=with_decoy, decoy_doc=" A decoy spends the crash points." if with_decoy else ""))
    return score_matrix_check(matrix_check(nb, "ex1_crash_matrix", ["after:refund_charge"], double=[]), folder)


def test_lesson7s_unkeyed_undo_with_a_decoy_scores_no_more_than_without(tmp_path):
    """The unkeyed undo loses the matrix's points (a crash after a compensation, then a resume, undoes twice); a
    decoy in ``undo.py`` (which the locked agent imports) that spends the crash points on another order wins none
    of them back. The full grading's path with a decoy is lesson 1's test above."""
    honest = lesson7_matrix(tmp_path, with_decoy=False)
    assert honest.score < honest.max_score, honest.output
    cheat = lesson7_matrix(tmp_path, with_decoy=True)
    assert cheat.score <= honest.score, f"with the decoy {cheat.score}, without {honest.score}:\n{cheat.output}"
