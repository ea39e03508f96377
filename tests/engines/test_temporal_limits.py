"""The Temporal dev server with a small history limit terminates a workflow for real: the wall a long agent hits,
scaled down. One server, one workflow, no worker: each signal with a 5 KB payload is an event of the history, and
the server terminates the run once the history passes ``limit.historySize.error`` (20 KB here)."""

from __future__ import annotations

import asyncio

import pytest

from crashlab.engines.temporal import TemporalServerError
from crashlab.engines.temporal.server import TemporalServer, check_dynamic_config, limits_folder

LIMIT = {"limit.historySize.error": 20_000}


def test_dynamic_config_is_checked_before_any_server_starts():
    assert check_dynamic_config(None) == {}
    assert check_dynamic_config({"b.x": True, "a.y": 3}) == {"a.y": 3, "b.x": True}
    assert limits_folder({"a": 1, "b": 2}) == limits_folder({"b": 2, "a": 1}) != limits_folder({"a": 2, "b": 2})
    for bad in ({"": 1}, {"a=b": 1}, {"a b": 1}, {"a": float("nan")}, {"a": object()}, [("a", 1)]):
        with pytest.raises(TemporalServerError):
            check_dynamic_config(bad)  # type: ignore[arg-type]


def test_a_small_history_size_limit_terminates_a_workflow(tmp_path):
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client, WorkflowExecutionStatus
    from temporalio.service import RPCError

    server = TemporalServer.start(tmp_path, reuse=False, dynamic_config=LIMIT)
    try:
        assert server.state_dir == tmp_path.resolve() / limits_folder(LIMIT)  # its own folder: never reused plainly
        assert TemporalServer.attach(server.state_dir).dynamic_config == LIMIT  # type: ignore[union-attr]

        async def grow() -> tuple[int, str, int]:
            client = await Client.connect(server.address)
            handle = await client.start_workflow("Waits", id="grows", task_queue="nobody-polls")
            refused = ""
            for _ in range(20):
                try:
                    await handle.signal("grow", "x" * 5000)
                except RPCError as exc:
                    refused = str(exc)
                    break
            events = [event async for event in handle.fetch_history_events()]
            reason = events[-1].workflow_execution_terminated_event_attributes.reason
            assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED
            return (await handle.describe()).status, reason, len(refused)

        status, reason, refused = asyncio.run(grow())
        assert status == WorkflowExecutionStatus.TERMINATED and reason == "Workflow history size exceeds limit."
        assert refused  # the signal that crossed the limit was refused, saying so
    finally:
        server.stop(force=True)
