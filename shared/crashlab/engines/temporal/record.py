"""Temporal's record of an order: its workflow history, read through the client from the server -- every event in
order, each with its type (``ActivityTaskScheduled``...), the activity it is about and its size as stored (the
event's protobuf bytes). Temporal numbers events, not turns: an entry's ``turn`` is None."""

from __future__ import annotations

from typing import Any

from crashlab.engines.record import Entry, Record, Store
from crashlab.order import ORDER_ID
from crashlab.plumbing.loops import in_own_loop

# The attributes of an activity's events after the first, each naming the scheduling event.
_LATER = ("activity_task_started_event_attributes", "activity_task_completed_event_attributes",
          "activity_task_failed_event_attributes", "activity_task_timed_out_event_attributes",
          "activity_task_cancel_requested_event_attributes", "activity_task_canceled_event_attributes")


def history(store: Store, order_id: str) -> list[Any]:
    """The workflow ``order_id``'s history events in the world's namespace; none if there is no such workflow."""
    from temporalio.service import RPCError, RPCStatusCode

    from crashlab.engines.temporal.client import connect, namespace_for

    async def fetch() -> list[Any]:
        client = await connect(namespace_for(store.agent_dir), address=store.server)
        try:
            return [event async for event in client.get_workflow_handle(order_id).fetch_history_events()]
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return []
            raise

    return in_own_loop(fetch)


def _kind(event: Any) -> str:
    """``EVENT_TYPE_ACTIVITY_TASK_SCHEDULED`` -> ``ActivityTaskScheduled``."""
    from temporalio.api.enums.v1 import EventType

    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").title().replace("_", "")


class HistoryReader:
    what = ("the workflow history: an event for every decision of the workflow and every activity scheduled, "
            "started and completed, with the activities' inputs and results")

    def read(self, store: Store, order_id: str) -> Record:
        return Record("temporal", order_id, tuple(self.entries(history(store, order_id))))

    def entries(self, events: list[Any]) -> list[Entry]:
        """One run's history events as entries (a workflow that continued as new has a history per run)."""
        scheduled: dict[int, str] = {}
        entries = []
        for event in events:
            name = ""
            if event.HasField("activity_task_scheduled_event_attributes"):
                name = scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            for field in _LATER:
                if event.HasField(field):
                    name = scheduled.get(getattr(event, field).scheduled_event_id, "")
            entries.append(Entry(_kind(event), name, event.ByteSize()))
        return entries


def temporal_activities(world: object, order_id: str = ORDER_ID) -> list[dict]:
    """The activities in the order's workflow history, in the order the history has them: one dict per event
    that schedules or completes one (``event``, ``what``, ``activity_type``, ``activity_id``)."""
    scheduled: dict[int, tuple[str, str]] = {}
    found = []
    for event in history(Store.of(world), order_id):
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = (attributes.activity_type.name, attributes.activity_id)
            found.append({"event": event.event_id, "what": "scheduled",
                          "activity_type": attributes.activity_type.name, "activity_id": attributes.activity_id})
        elif event.HasField("activity_task_completed_event_attributes"):
            kind, activity_id = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id,
                                              ("?", "?"))
            found.append({"event": event.event_id, "what": "completed", "activity_type": kind,
                          "activity_id": activity_id})
    return found


__all__ = ["HistoryReader", "history", "temporal_activities"]
