"""The long-haul lesson's measures: how an engine's durable record grows turn by turn, the growth exponent fitted to
it, the one log-log picture of every engine's growth, and the runs of a Temporal workflow that continued as new.

Each reads what an engine stored (an :class:`~crashlab.engines.record.Record` from the engine's own store), never
what the agent says about itself. A lesson names which of a record's entries ends a tool turn, since each engine
keeps its own words for it (an ``ActivityTaskCompleted`` of ``run_tool``, a DBOS step, a LangGraph write)."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from crashlab.engines.growth import bytes_by_turn, growth_exponent, human_bytes
from crashlab.engines.record import Entry, Record, Store


def one_record(records: Sequence[Record]) -> Record:
    """Several records as one, their entries one after the other: every run of a workflow that continued as new."""
    if not records:
        raise ValueError("one_record needs at least one record")
    return Record(records[0].engine, records[0].order_id, tuple(e for r in records for e in r))


def growth_plot(curves: dict[str, Sequence[float]], title: str, limit: float | None = None, limit_label: str = "",
                terminated: Sequence[str] = ()) -> Any:
    """One log-log figure of bytes stored against tool turns, a line per engine; the legend in two columns in the lower
    right, in room left below every line. ``limit`` draws a horizontal line (a history size limit)
    labelled ``limit_label``; the curves named in ``terminated`` end in a cross, where the run was stopped."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.4, 4.6))
    right, lowest, highest = 1, float("inf"), 0.0
    colours = len(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for index, (label, sizes) in enumerate(curves.items()):
        turns = list(range(1, len(sizes) + 1))  # past the colour cycle, a colour comes again: dashed, to tell them apart
        [line] = ax.plot(turns, sizes, linewidth=2, label=label, linestyle="-" if index < colours else "--")
        if label in terminated:
            ax.plot(turns[-1:], sizes[-1:], "X", markersize=11, color=line.get_color())
        right, lowest, highest = max(right, turns[-1]), min(lowest, min(sizes)), max(highest, max(sizes))
    if limit is not None:
        ax.axhline(limit, color="#c44", linestyle="--", linewidth=1)
        ax.annotate(limit_label, (1, limit), xytext=(2, 4), textcoords="offset points", fontsize=10, color="#c44")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1, right * 1.5)
    top = max(highest, limit or 0) * 2
    room = min(0.6, 0.04 + 0.062 * math.ceil(len(curves) / 2))  # the legend's share of the height: two columns
    decades = math.log10(top / lowest)
    ax.set_ylim(lowest / 10 ** (decades * room / (1 - room)), top)  # below every line: the legend's room
    ax.set_xlabel("tool turns recorded", fontsize=11)
    ax.set_ylabel("bytes in the durable record", fontsize=11)
    ax.set_title(title, fontsize=12)
    ax.tick_params(labelsize=10)
    ax.legend(loc="lower right", fontsize=10, ncol=2)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig


def temporal_runs(world: object, workflow_id: str) -> list[Record]:
    """Every run of workflow ``workflow_id`` in ``world``'s namespace, oldest first, each run's history as a
    :class:`Record`: a workflow that continued as new has one history per run, and the server's limits apply to
    each on its own."""
    from crashlab.engines.temporal.client import connect, namespace_for
    from crashlab.engines.temporal.record import HistoryReader
    from crashlab.plumbing.loops import in_own_loop

    store = Store.of(world)

    async def runs() -> list[tuple[Any, list[Any]]]:
        client = await connect(namespace_for(store.agent_dir))
        found = [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
        found.sort(key=lambda w: w.start_time)
        return [(w.run_id, [e async for e in client.get_workflow_handle(workflow_id, run_id=w.run_id)
                           .fetch_history_events()]) for w in found]

    reader = HistoryReader()
    return [Record("temporal", f"{workflow_id} run {run_id}", tuple(reader.entries(events)))
            for run_id, events in in_own_loop(runs)]


def stored_record(world: object, workflow_id: str, stored_size: Callable[[dict[str, str]], int]) -> Record:
    """What workflow ``workflow_id``'s (latest run's) history keeps in an external payload store, as a
    :class:`Record` beside its history: one entry per history event, sized by the bytes of the stored payloads that
    event is the first to refer to -- ``stored_size(claim_data)``, read from the store itself (a payload referred to
    again is stored once). ``bytes_by_turn`` then reads the store's growth turn by turn, as it reads the history's."""
    from crashlab.engines.temporal.record import HistoryReader, external_claims, history

    events = history(Store.of(world), workflow_id)
    seen: set[tuple[tuple[str, str], ...]] = set()
    entries = []
    for entry, event in zip(HistoryReader().entries(events), events):
        size = 0
        for claim in external_claims(event):
            if (key := tuple(sorted(claim.items()))) not in seen:
                seen.add(key)
                size += stored_size(claim)
        entries.append(Entry(entry.kind, entry.name, size))
    return Record("temporal", f"{workflow_id} (external store)", tuple(entries))


def history_signals(world: object, workflow_id: str) -> list[tuple[int, bool]]:
    """What the server told the workflow at each workflow task of its (latest) run: the history's size in bytes and
    whether it suggested continuing as new -- the values ``workflow.info().get_current_history_size()`` and
    ``is_continue_as_new_suggested()`` return -- read from the ``WorkflowTaskStarted`` events."""
    from crashlab.engines.temporal.record import history

    return [(e.workflow_task_started_event_attributes.history_size_bytes,
             e.workflow_task_started_event_attributes.suggest_continue_as_new)
            for e in history(Store.of(world), workflow_id) if e.HasField("workflow_task_started_event_attributes")]


__all__ = ["bytes_by_turn", "growth_exponent", "growth_plot", "history_signals", "human_bytes", "one_record", "stored_record",
           "temporal_runs"]
