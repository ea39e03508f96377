"""What a lesson notebook imports, and all it imports from the course: the harness, the world, the pictures,
the servers, the lesson helpers -- one import path, so that moving a module inside the library never touches
a notebook. Each name is imported on first use; a kernel that draws no heatmap never loads matplotlib.

The lesson-specific helpers live beside this facade: :mod:`.kernel` (worlds and runs in a lesson's kernel),
:mod:`.notebook` (a lesson's folder and exercise gates), :mod:`.words` (a failed check's words), :mod:`.restate`
(the Restate lesson's scenes), :mod:`.interview` (the question bank), :mod:`.frameworks` (a framework's agent's keys
and tables). What each engine records of an order is read by the engine's own folder (``read_record``).
"""

from crashlab.lessons import interview
from crashlab.lessons import restate as restate_lesson
from crashlab.plumbing.lazy import lazy_exports
from crashlab.plumbing.scratch import sweep_scratch

_HARNESS = "crashlab.harness"
_AGENT = "crashlab.agent"
_ON_DEMAND = {
    # the crash harness
    **dict.fromkeys(["BASELINE", "CrashTestAgents", "Matrix", "RunningAgent", "crash_row", "crash_test",
                     "double_crash_pairs", "run_agent", "run_python", "start_agent"], _HARNESS),
    **dict.fromkeys(["WarmLauncher", "kept_launcher"], "crashlab.harness.launcher"),
    # the world, the order, and the agent's own clients (a lesson calls a tool by hand, or reads a reply)
    "World": "crashlab.world",
    **dict.fromkeys(["AMOUNT", "ORDER_ID", "SKU", "TOOLS", "TOOLS_WITH_UNDO", "UNDO_TOOLS", "order_details",
                     "order_task", "undo_steps"], "crashlab.order"),
    **dict.fromkeys(["MAX_TOKENS", "MODEL", "AgentError", "ToolCallFailed", "agent_main", "call_tool", "charge_card",
                     "first_tool_use", "list_charges", "model_client", "reserve_item", "send_confirmation",
                     "state_dir"], _AGENT),
    # a lesson's kernel and folder
    **dict.fromkeys(["extract_lesson_files", "fresh_world", "show_log", "show_run", "stop_worlds"],
                    "crashlab.lessons.kernel"),
    **dict.fromkeys(["needs_exercise", "work_in_lesson_folder"], "crashlab.lessons.notebook"),
    **dict.fromkeys(["expected_got", "stopped_before"], "crashlab.lessons.words"),
    **dict.fromkeys(["finish", "variant"], "crashlab.lessons.restate"),
    **dict.fromkeys(["effect_keys", "markdown_table", "median_recovery"], "crashlab.lessons.frameworks"),
    "in_own_loop": "crashlab.plumbing.loops",
    "failure_words": "crashlab.plumbing.tracebacks",
    "remove_scratch": "crashlab.plumbing.scratch",
    "free_port": "crashlab.plumbing.ports",
    # pictures and the demo
    **dict.fromkeys(["matrix_heatmap", "timeline"], "crashlab.report.plots"),
    "show_figure": "crashlab.report.figures",
    **dict.fromkeys(["reference_matrices", "terminal_summary"], "crashlab.report.demo"),
    # the engines' servers, and what lessons read from them
    "Needs": "crashlab.engines.needs",
    **dict.fromkeys(["fresh_database", "postgres_available", "throwaway_postgres"], "crashlab.engines.postgres"),
    **dict.fromkeys(["RestateServer", "RestateServerError", "admin_sql", "call_handler", "invocation_row",
                     "resolve_awakeable"], "crashlab.engines.restate"),
    **dict.fromkeys(["TemporalServer", "TemporalServerError", "connect", "namespace_for", "use_quiet_runtime"],
                    "crashlab.engines.temporal"),
    "replay_verdict": "crashlab.engines.temporal.replay",
    # what each engine records of an order, read from its own store
    **dict.fromkeys(["ENGINES", "read_record"], "crashlab.engines.registry"),
    "checkpoint_writes": "crashlab.engines.langgraph.record",
    "dbos_steps": "crashlab.engines.dbos.record",
    "temporal_activities": "crashlab.engines.temporal.record",
    **dict.fromkeys(["journal_entry_types", "step_result", "world_service"], "crashlab.engines.restate.record"),
    # the benchmark
    "run_benchmark": "crashlab.bench",
    "seconds_per_step": "crashlab.engines.temporal.bench_workflow",
    # an exercise that builds on an earlier one's answer (the grader hands the reference's when it is wrong)
    **dict.fromkeys(["on_reference_answers", "reference_value"], "crashlab.grading.references"),
}
__getattr__, __dir__ = lazy_exports(globals(), _ON_DEMAND)
sweep_scratch()  # a notebook starts here as a command does: what a kernel killed by SIGKILL left goes
del sweep_scratch

__all__ = ["interview", "restate_lesson", *_ON_DEMAND]
