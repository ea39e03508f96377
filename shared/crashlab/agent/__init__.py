"""What an agent file imports, and all it imports from the course: the order task, the model client, the tool
client, the entry point, and the engines' clients.

Agents reach the model and the tools through these clients. Crash points are not in here: the world decides
and observes them (:mod:`crashlab.world.crashes`), so nothing in an agent process can tell whether it is about
to be killed, or pretend that it was. The model client is the real ``anthropic`` SDK pointed at the course's
local model server; the tools are HTTP calls to the world's services.

A minimal agent file::

    from crashlab.agent import MODEL, TOOLS, model_client, call_tool, order_task, agent_main

    def run(order_id):
        client = model_client()
        messages = [{"role": "user", "content": order_task(order_id)}]
        ...

    if __name__ == "__main__":
        agent_main(run)

The long task (:mod:`crashlab.backlog`): an agent given a backlog id (``ORD-BL-034``) starts its conversation with
``task_for(order_id)`` (the backlog's task, or the order's), and compacts it by asking ``SUMMARY_ASK`` with no tools:
the model answers the ``progress_line`` the new conversation carries on.

The engines' clients are named here too, and imported only when an agent uses them, so an agent process loads
only its own engine. An earlier lesson's answers are not: an agent that builds on them imports them by their own
name (``from crashlab.answers.lesson01 import run_logged_order``), which is how the release and the grader see
that a lesson builds on another's answers.
"""

from typing import TYPE_CHECKING

from crashlab.agent.model import (MAX_TOKENS, MODEL, MODEL_TIMEOUT, ONE_TOOL_PER_TURN, ModelClient, async_sdk_client,
                                  content_to_dicts,
                                  first_tool_use, model_client, real_api_enabled, tool_error_message,
                                  tool_result_message, warm_up_sdk)
from crashlab.agent.run import agent_main
from crashlab.agent.screen import retract, screen_cursor, show
from crashlab.agent.tools import (TOOL_TIMEOUT, call_tool, charge_card, list_charges, list_reservations,
                                  refund_charge, release_item,
                                  reserve_item, send_cancellation, send_confirmation, validate_tool_call)
from crashlab.backlog import SUMMARY_ASK, backlog_task, backlog_turns, is_backlog, progress_line, task_for
from crashlab.envnames import state_dir
from crashlab.errors import (AgentError, CallFailed, MalformedToolCall, ModelCallFailed, ToolCallFailed,
                             WorldNotRunning)
from crashlab.order import (ALL_TOOL_SCHEMAS, AMOUNT, COMPENSATION_TOOLS, ORDER_ID, SKU, TOOLS,
                            TOOLS_WITH_UNDO, UNDO_TOOLS, order_details, order_task, undo_request, undo_steps,
                            undo_task)
from crashlab.plumbing.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use: an agent process loads only its own engine's client
    # Temporal: the world's namespace and a connected client
    from crashlab.engines.temporal.client import (TemporalUnavailable, connect, namespace_for, temporal_address,
                                                  use_quiet_runtime)
    # Restate: the endpoint Restate pushes to, and the server's admin and ingress APIs
    from crashlab.engines.restate.client import (RestateUnavailable, attach, call_handler, endpoint_for,
                                                 invocation_row, journal_names, resolve_awakeable, restate_urls,
                                                 serve_endpoint, stuck_reason)
    # lesson 1's event log
    from crashlab.eventlog import CorruptLogError, append_event

__getattr__, __dir__ = lazy_exports(globals())

__all__ = ["ALL_TOOL_SCHEMAS", "AMOUNT", "COMPENSATION_TOOLS", "MAX_TOKENS", "MODEL", "MODEL_TIMEOUT", "ONE_TOOL_PER_TURN",
           "ORDER_ID", "SKU", "SUMMARY_ASK", "backlog_task", "backlog_turns", "is_backlog", "progress_line", "task_for", "TOOLS", "TOOLS_WITH_UNDO", "TOOL_TIMEOUT", "UNDO_TOOLS", "AgentError", "CallFailed",
           "MalformedToolCall", "ModelCallFailed", "ModelClient", "ToolCallFailed", "WorldNotRunning", "agent_main",
           "async_sdk_client",
           "call_tool", "charge_card", "content_to_dicts", "first_tool_use", "list_charges", "list_reservations",
           "model_client",
           "order_details", "order_task", "real_api_enabled", "refund_charge", "release_item", "reserve_item",
           "send_cancellation", "send_confirmation", "state_dir", "tool_error_message", "tool_result_message",
           "undo_request", "undo_steps", "undo_task", "validate_tool_call", "warm_up_sdk",
           "TemporalUnavailable", "connect", "namespace_for", "temporal_address", "use_quiet_runtime",
           "RestateUnavailable", "attach", "call_handler", "endpoint_for", "invocation_row", "journal_names",
           "resolve_awakeable", "restate_urls", "serve_endpoint", "stuck_reason", "CorruptLogError", "append_event",
           "retract", "screen_cursor", "show"]
