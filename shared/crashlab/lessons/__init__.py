"""What a lesson notebook imports, and all it imports from the course: the harness, the world, the pictures,
the servers, the lesson helpers -- one import path, so that moving a module inside the library never touches
a notebook. Each name is imported on first use; a kernel that draws no heatmap never loads matplotlib.

The lesson-specific helpers live beside this facade: :mod:`.kernel` (worlds and runs in a lesson's kernel),
:mod:`.notebook` (a lesson's folder and exercise gates), :mod:`.words` (a failed check's words), :mod:`.restate`
(the Restate lesson's scenes), :mod:`.interview` (the question bank), :mod:`.frameworks` (a framework's agent's keys
and tables). What each engine records of an order is read by the engine's own folder (``read_record``).
"""

from typing import TYPE_CHECKING

from crashlab.lessons import interview
from crashlab.lessons import restate as restate_lesson
from crashlab.plumbing.lazy import lazy_exports
from crashlab.plumbing.scratch import sweep_scratch

if TYPE_CHECKING:  # each imported on first use (crashlab.plumbing.lazy reads this block)
    # the crash harness
    from crashlab.harness import (BASELINE, CrashTestAgents, Matrix, RunningAgent, crash_row, crash_test,
                                  double_crash_pairs, run_agent, run_python, start_agent)
    from crashlab.harness.launcher import WarmLauncher, kept_launcher
    # what the user saw of a streamed answer (the world's screen is read through World.screen, World.screen_audit)
    from crashlab.harness.verdicts import judge_screen
    # the world, the order, and the agent's own clients (a lesson calls a tool by hand, or reads a reply)
    from crashlab.world.control import World
    from crashlab.order import (AMOUNT, ORDER_ID, SKU, TOOLS, TOOLS_WITH_UNDO, UNDO_TOOLS, order_details, order_task,
                                undo_steps)
    from crashlab.agent import (MAX_TOKENS, MODEL, AgentError, ToolCallFailed, agent_main, call_tool, charge_card,
                                first_tool_use, list_charges, model_client, reserve_item, send_confirmation, state_dir)
    # the long task: a backlog of orders, its plan, its crash points and its audit
    from crashlab.backlog import (SUMMARY_ASK, backlog_id, backlog_of, backlog_orders, backlog_task, backlog_turns,
                                  is_backlog, plan, progress_line, task_for)
    from crashlab.crash_points import boundary_points
    from crashlab.world.backlog_audit import BacklogAudit
    # a lesson's kernel and folder
    from crashlab.lessons.kernel import extract_lesson_files, say, show_log, show_run
    from crashlab.world.scenes import fresh_world, stop_worlds
    from crashlab.lessons.notebook import needs_exercise, work_in_lesson_folder
    from crashlab.lessons.words import expected_got, stopped_before
    from crashlab.lessons.restate import finish, variant
    from crashlab.lessons.frameworks import effect_keys, markdown_table, median_recovery
    from crashlab.plumbing.loops import in_own_loop
    from crashlab.plumbing.tracebacks import failure_words
    from crashlab.plumbing.scratch import remove_scratch
    from crashlab.plumbing.ports import free_port
    # pictures and the demo
    from crashlab.report.plots import matrix_heatmap, timeline
    from crashlab.report.figures import show_figure
    from crashlab.report.demo import reference_matrices, terminal_summary
    # the engines' servers, and what lessons read from them
    from crashlab.engines.needs import Needs
    from crashlab.engines.postgres import fresh_database, postgres_available, throwaway_postgres
    from crashlab.engines.restate.server import RestateServer
    from crashlab.engines.restate import RestateServerError
    from crashlab.engines.restate.client import admin_sql, call_handler, invocation_row, resolve_awakeable
    from crashlab.engines.temporal.server import TemporalServer
    from crashlab.engines.temporal import TemporalServerError
    from crashlab.engines.temporal.client import connect, namespace_for, use_quiet_runtime
    from crashlab.engines.temporal.replay import replay_verdict
    # what each engine records of an order, read from its own store
    from crashlab.engines.registry import ENGINES, read_record
    from crashlab.engines.langgraph.record import checkpoint_writes
    from crashlab.engines.dbos.record import dbos_steps, dbos_stream
    from crashlab.engines.temporal.record import temporal_activities
    from crashlab.engines.restate.record import journal_entry_types, step_result, world_service
    # the long haul: how a durable record grows with the turns
    from crashlab.lessons.long_haul import (bytes_by_turn, growth_exponent, growth_plot, history_signals, human_bytes,
                                            one_record, stored_record, temporal_runs)
    # streaming: what the user saw, and what a streamed chunk costs
    from crashlab.lessons.streaming import chunk_costs, cost_lines, user_saw
    # the benchmark
    from crashlab.bench import run_benchmark, run_long_agents
    from crashlab.engines.temporal.bench_workflow import seconds_per_step
    # the soak's bill of a stalled world, engine by engine (the side-by-side lesson)
    from crashlab.soak.zombies import zombie_cost
    # an exercise that builds on an earlier one's answer (the grader hands the reference's when it is wrong)
    from crashlab.grading.references import on_reference_answers, reference_value

__getattr__, __dir__ = lazy_exports(globals())
sweep_scratch()  # a notebook starts here as a command does: what a kernel killed by SIGKILL left goes
del sweep_scratch

__all__ = [
    "AMOUNT", "AgentError", "BASELINE", "BacklogAudit", "SUMMARY_ASK", "backlog_id", "backlog_of", "backlog_orders",
    "backlog_task", "backlog_turns", "boundary_points", "is_backlog", "plan", "progress_line", "task_for", "CrashTestAgents", "ENGINES", "MAX_TOKENS", "MODEL", "Matrix", "Needs",
    "ORDER_ID", "RestateServer", "RestateServerError", "RunningAgent", "SKU", "TOOLS", "TOOLS_WITH_UNDO",
    "TemporalServer", "TemporalServerError", "ToolCallFailed", "UNDO_TOOLS", "WarmLauncher", "World", "admin_sql",
    "agent_main", "bytes_by_turn", "call_handler", "call_tool", "charge_card", "checkpoint_writes", "connect", "crash_row",
    "crash_test", "dbos_steps", "double_crash_pairs", "effect_keys", "expected_got", "extract_lesson_files",
    "failure_words", "finish", "first_tool_use", "free_port", "fresh_database", "fresh_world", "growth_exponent", "growth_plot", "history_signals", "human_bytes", "in_own_loop",
    "interview", "invocation_row", "journal_entry_types", "kept_launcher", "list_charges", "markdown_table",
    "matrix_heatmap", "median_recovery", "model_client", "namespace_for", "needs_exercise", "one_record", "on_reference_answers",
    "order_details", "order_task", "postgres_available", "read_record", "reference_matrices", "reference_value",
    "remove_scratch", "replay_verdict", "reserve_item", "resolve_awakeable", "restate_lesson", "run_agent",
    "run_benchmark", "run_python", "say", "seconds_per_step", "send_confirmation", "show_figure", "show_log", "show_run",
    "start_agent", "state_dir", "step_result", "stop_worlds", "stopped_before", "stored_record", "temporal_activities",
    "temporal_runs",
    "terminal_summary", "throwaway_postgres", "timeline", "undo_steps", "use_quiet_runtime", "variant",
    "work_in_lesson_folder", "world_service", "zombie_cost",
    "judge_screen",
    "chunk_costs", "cost_lines", "dbos_stream", "user_saw",
    "run_long_agents",  # the long agent, one row per engine (the side-by-side lesson)
]
