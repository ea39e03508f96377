"""Restate's record of an order: the journal of its invocations, read with the server's admin SQL API (so it works
with no endpoint up) -- every entry in order, each with its type (``Command: Run``...), its ``ctx.run`` name and its
size as the server stores it. Restate does not number turns: an entry's ``turn`` is None.

The service name comes from the world's agent state directory, where the first agent process wrote it
(:func:`crashlab.engines.restate.client.endpoint_for`). That process is the student's, so the name is untrusted: it
is accepted only in the shape ``endpoint_for`` gives (``Order_`` and letters, digits, underscores) and quoted in
every query.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from crashlab.engines.record import Entry, Record, Store
from crashlab.order import ORDER_ID

SERVICE_NAME = re.compile(r"Order_[A-Za-z0-9_]{1,64}")


def _agent_dir(world: object) -> Path:
    return Path(getattr(world, "agent_dir", world))  # type: ignore[arg-type]


def world_service(world: object) -> str:
    """The service name of ``world``'s order object (a World or its agent state directory); a ValueError if no
    agent has chosen one yet, or if what is there is not a name :func:`endpoint_for` could have chosen."""
    from crashlab.engines.restate.client import ENDPOINT_FILE

    path = _agent_dir(world) / ENDPOINT_FILE
    try:
        name = json.loads(path.read_text()).get("service")
    except (OSError, ValueError, AttributeError):
        raise ValueError(f"no agent has chosen this world's service yet ({path} is missing or unreadable)") from None
    if not isinstance(name, str) or not SERVICE_NAME.fullmatch(name):
        raise ValueError(f"{path} names the service {str(name)[:80]!r}, which endpoint_for never chooses")
    return name


def order_invocations(admin_url: str, world: object, order_id: str = ORDER_ID, handler: str = "run") -> list[dict]:
    """The order's invocations of ``handler``, oldest first."""
    from crashlab.engines.restate.client import admin_sql, sql_quoted

    return admin_sql(admin_url, "SELECT id, status, pinned_deployment_id, retry_count, created_at FROM sys_invocation "
                                f"WHERE target_service_name = '{sql_quoted(world_service(world))}' AND target_service_key "
                                f"= '{sql_quoted(order_id)}' AND target_handler_name = '{sql_quoted(handler)}' "
                                "ORDER BY created_at")


def journal(admin_url: str, invocation_id: str) -> list[dict[str, Any]]:
    """An invocation's journal as the server stores it, one row per entry in order: ``index``, ``entry_type``,
    ``name``, ``raw_length`` (its stored bytes) and ``entry_json``."""
    from crashlab.engines.restate.client import admin_sql, sql_quoted

    return admin_sql(admin_url, "SELECT index, entry_type, name, raw_length, entry_json FROM sys_journal WHERE id = "
                                f"'{sql_quoted(invocation_id)}' ORDER BY index")


def steps_of(admin_url: str, world: object, order_id: str = ORDER_ID) -> list[str]:
    """The names of the ctx.run steps in the order's (first) invocation's journal."""
    from crashlab.engines.restate.client import journal_names

    found = order_invocations(admin_url, world, order_id)
    return journal_names(admin_url, found[0]["id"]) if found else []


def journal_entry_types(admin_url: str, invocation_id: str) -> list[str]:
    """The types of every entry of an invocation's journal, in order (``Command: Run``, ``Command: Sleep`` ...)."""
    return [str(row.get("entry_type", "")) for row in journal(admin_url, invocation_id)]


def step_result(admin_url: str, invocation_id: str, name: str):
    """The result the journal holds for the ``ctx.run`` step called ``name`` (its first one), decoded from JSON; None
    if the step has no result there. What a replay of the handler gets back, whichever attempt wrote it."""
    entries = [json.loads(row.get("entry_json") or "{}") for row in journal(admin_url, invocation_id)]
    runs = [entry["Command"]["Run"] for entry in entries if "Run" in entry.get("Command", {})]
    wanted = next((run["completion_id"] for run in runs if run.get("name") == name), None)
    for entry in entries:
        done = entry.get("Notification", {}).get("Completion", {}).get("Run", {})
        if wanted is not None and done.get("completion_id") == wanted and "Success" in done.get("result", {}):
            return json.loads(bytes(done["result"]["Success"]))
    return None


class JournalReader:
    what = ("the journal of the order's invocations: an entry for the input, each ctx.run step and its result, each "
            "sleep, awakeable and state change, kept by the server")

    def read(self, store: Store, order_id: str) -> Record:
        from crashlab.engines.restate import ENV_RESTATE_ADMIN

        admin = store.server or os.environ.get(ENV_RESTATE_ADMIN)
        if not admin:
            raise ValueError(f"no Restate admin URL: give Store(server=...) or set {ENV_RESTATE_ADMIN}")
        entries = [Entry(str(row.get("entry_type") or ""), str(row.get("name") or ""), int(row.get("raw_length") or 0))
                   for invocation in order_invocations(admin, store.agent_dir, order_id)
                   for row in journal(admin, invocation["id"])]
        return Record("restate", order_id, tuple(entries))


__all__ = ["SERVICE_NAME", "JournalReader", "journal", "journal_entry_types", "order_invocations", "step_result",
           "steps_of", "world_service"]
