"""The library's three faces, pinned: what a program (``crashlab``), an agent file (``crashlab.agent``) and a
lesson notebook (``crashlab.lessons``) may import. A name added or removed here is a change to the course's
public interface, made on purpose; and the masters and their agent files import through their own face only,
so that moving a module inside the library never touches a notebook."""

import ast
import json
import re
from pathlib import Path

import pytest

import crashlab
import crashlab.agent
import crashlab.lessons

ROOT = Path(__file__).resolve().parents[2]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))

PROGRAMS = ["AMOUNT", "ORDER_ID", "SKU", "World", "order_task"]
AGENT = [
    "ALL_TOOL_SCHEMAS", "AMOUNT", "AgentError", "COMPENSATION_TOOLS", "CallFailed", "CorruptLogError",
    "MAX_TOKENS", "MODEL", "MODEL_TIMEOUT", "MalformedToolCall", "ModelCallFailed", "ModelClient",
    "ONE_TOOL_PER_TURN", "ORDER_ID", "RestateUnavailable", "SKU", "TOOLS", "TOOLS_WITH_UNDO", "TOOL_TIMEOUT",
    "TemporalUnavailable", "ToolCallFailed", "UNDO_TOOLS", "WorldNotRunning", "agent_main", "append_event",
    "async_sdk_client", "attach", "call_handler", "call_tool", "charge_card", "connect", "content_to_dicts", "endpoint_for",
    "first_tool_use", "invocation_row", "journal_names", "list_charges", "list_reservations", "model_client",
    "namespace_for",
    "order_details", "order_task", "real_api_enabled", "refund_charge",
    "release_item", "reserve_item", "resolve_awakeable", "restate_urls",
    "send_cancellation", "send_confirmation", "serve_endpoint", "state_dir", "stuck_reason", "temporal_address",
    "tool_error_message", "tool_result_message", "undo_request", "undo_steps", "undo_task", "use_quiet_runtime",
    "validate_tool_call", "warm_up_sdk",
    "retract", "screen_cursor", "show",
    # the long task
    "SUMMARY_ASK", "backlog_task", "backlog_turns", "is_backlog", "progress_line", "task_for",
]
LESSONS = [
    "AMOUNT", "ENGINES", "AgentError", "BASELINE", "CrashTestAgents", "MAX_TOKENS", "MODEL", "Matrix", "Needs", "ORDER_ID",
    "RestateServer", "RestateServerError", "RunningAgent", "SKU", "TOOLS", "TOOLS_WITH_UNDO", "TemporalServer",
    "TemporalServerError", "ToolCallFailed", "UNDO_TOOLS", "WarmLauncher", "World", "admin_sql", "agent_main",
    "call_handler", "call_tool", "charge_card", "checkpoint_writes", "connect", "crash_row", "crash_test",
    "dbos_steps", "double_crash_pairs", "effect_keys", "expected_got", "extract_lesson_files", "failure_words", "finish", "first_tool_use", "free_port", "fresh_database",
    "fresh_world", "in_own_loop", "interview", "invocation_row", "journal_entry_types", "kept_launcher", "list_charges", "markdown_table",
    "matrix_heatmap", "median_recovery",
    "model_client", "namespace_for", "needs_exercise", "on_reference_answers", "order_details", "order_task",
    "postgres_available", "read_record", "reference_matrices", "reference_value", "remove_scratch", "replay_verdict",
    "reserve_item", "resolve_awakeable", "restate_lesson", "run_agent", "run_benchmark", "run_python",
    "say", "seconds_per_step", "send_confirmation", "show_figure", "show_log", "show_run", "start_agent", "state_dir",
    "step_result", "stop_worlds", "stopped_before", "temporal_activities", "terminal_summary", "throwaway_postgres", "timeline",
    "undo_steps", "use_quiet_runtime",
    "variant", "work_in_lesson_folder", "world_service", "zombie_cost",
    "judge_screen",
    # streaming: what the user saw, what a chunk costs, a DBOS stream's rows
    "chunk_costs", "cost_lines", "dbos_stream", "user_saw",
    # the long haul's measures
    "bytes_by_turn", "growth_exponent", "growth_plot", "history_signals", "human_bytes", "one_record", "stored_record",
    "temporal_runs",
    # the long task
    "BacklogAudit", "SUMMARY_ASK", "backlog_id", "backlog_of", "backlog_orders", "backlog_task", "backlog_turns",
    "boundary_points", "is_backlog", "plan", "progress_line", "task_for",
    # the benchmark's length axis: the long agent, one row per engine
    "run_long_agents",
]


@pytest.mark.parametrize("module, expected", [(crashlab, PROGRAMS), (crashlab.agent, AGENT),
                                              (crashlab.lessons, LESSONS)], ids=["crashlab", "agent", "lessons"])
def test_each_face_exports_exactly_its_names_and_each_resolves(module, expected):
    assert sorted(module.__all__) == sorted(expected)
    unresolved = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert not unresolved, f"{module.__name__} names {unresolved} but cannot import them"


def _imports(source: str) -> list[str]:
    """The crashlab modules a piece of Python imports from (cell magics and shell lines dropped)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "crashlab":
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "crashlab"]
    return found


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_a_master_imports_the_lessons_face_and_its_agent_files_the_agent_face(master):
    wrong = []
    for cell in json.loads(master.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        agent_file = re.match(r"\s*%%writefile", source) is not None
        face = "crashlab.agent" if agent_file else "crashlab.lessons"
        # an agent that builds on an earlier lesson's answers names them: the release and the grader look for it
        wrong += [(face, module) for module in _imports(source)
                  if module != face and not (agent_file and re.fullmatch(r"crashlab\.answers\.lesson\d\d", module))]
    assert not wrong, f"{master.name} imports past its face: {sorted(set(wrong))}"



AGENT_NEVER_LOADS = ("crashlab.world", "crashlab.harness", "crashlab.grading", "crashlab.lessons", "crashlab.report",
                     "crashlab.plumbing.sandbox")


@pytest.mark.parametrize("code", ["import crashlab.agent",
                                  "from crashlab.agent import connect, attach, append_event, agent_main"])
def test_an_agent_process_loads_nothing_of_the_world_the_harness_or_the_grader(code):
    """What import-linter checks in the source, checked at run time in a fresh interpreter: an agent file's import,
    its engine's client included, loads no module of the world, the harness, the grader or the sandbox."""
    import subprocess
    import sys

    shown = "import sys; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", f"{code}; {shown}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = [m for m in done.stdout.split() if m.startswith(AGENT_NEVER_LOADS)]
    assert loaded == [], f"{code!r} loaded {loaded}"
    assert "crashlab.agent" in done.stdout.split()
