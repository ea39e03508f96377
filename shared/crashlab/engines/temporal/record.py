"""Temporal's record of an order: its workflow history, read through the client from the server -- every event in
order, each with its type (``ActivityTaskScheduled``...), the activity it is about and its size as stored (the
event's protobuf bytes). Temporal numbers events, not turns: an entry's ``turn`` is None."""

from __future__ import annotations

from typing import Any, Iterator

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


def _payloads(message: Any) -> Iterator[Any]:
    """Every ``Payload`` inside a protobuf message, at any depth (inputs, results, headers, memos)."""
    from temporalio.api.common.v1 import Payload

    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = list(value.values()) if field.message_type.fields_by_name["value"].message_type else []
        else:
            values = list(value) if field.is_repeated else [value]
        for inner in values:
            if isinstance(inner, Payload):
                yield inner
            else:
                yield from _payloads(inner)


def external_claims(event: Any) -> list[dict[str, str]]:
    """The claims of the payloads a history event keeps in an external store (temporalio's external payload storage):
    each reference the SDK wrote in a payload's place, as its driver's ``claim_data``. The SDK marks a reference by
    the stored payload's size in ``external_payloads``; the claim is the ``ExternalStorageReference`` in its data."""
    from google.protobuf.json_format import Parse
    from temporalio.api.sdk.v1.external_storage_pb2 import ExternalStorageReference

    return [dict(Parse(payload.data, ExternalStorageReference()).claim_data)
            for payload in _payloads(event) if len(payload.external_payloads)]


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


__all__ = ["HistoryReader", "external_claims", "history", "temporal_activities"]
