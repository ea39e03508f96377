"""A fixture agent for the compensation lesson: lesson 1's logged loop with keyed tools, and compensation
owned by the code. When a step fails for good, it records the failure, then undoes the steps that succeeded,
in reverse order, and sends a cancellation -- each compensation keyed by the order and the step, and logged
once done, so a crash anywhere in the undo resumes it without a second refund. The model is asked nothing
after the failure: the code, not the model, decides to undo.

``naive_compensating_agent.py`` runs the same code with no keys on the compensations.
"""

import time

from crashlab.agent import ToolCallFailed, agent_main, call_tool, state_dir
from crashlab.answers.lesson01 import order_lock, read_events, run_logged_order
from crashlab.eventlog import append_event
from crashlab.order import order_details, undo_steps


def execute(order_id: str, step: int, call: dict) -> dict:
    return call_tool(call["name"], call["input"], idempotency_key=f"{order_id}:{step}")


def succeeded(log) -> list[str]:
    """The do steps whose result the order's log holds, in order."""
    names, done = {}, []
    for event in read_events(log):
        if event["type"] == "decision":
            names.update({b["id"]: b["name"] for b in event["content"] if b["type"] == "tool_use"})
        elif event["type"] == "result":
            done.append(names[event["tool_use_id"]])
    return done


def compensate(order_id: str, step: str, *, keyed: bool) -> dict:
    amount, sku = order_details(order_id)
    args = {"refund_charge": {"order_id": order_id, "amount": amount},
            "release_item": {"order_id": order_id, "sku": sku},
            "send_cancellation": {"order_id": order_id}}[step]
    key = f"{order_id}:undo:{step}" if keyed else None
    for attempt in range(5):
        try:
            return call_tool(step, args, idempotency_key=key)
        except ToolCallFailed as exc:
            if not exc.retryable or attempt == 4:
                raise
            time.sleep(0.05 * 2 ** attempt)


def run(order_id: str, keyed: bool = True) -> None:
    folder = state_dir()
    journal = folder / f"{order_id}.undo.jsonl"
    with order_lock(folder / f"{order_id}.saga.lock"):  # resumers take turns over the do and the undo alike
        events = read_events(journal)
        if any(e["type"] == "undone" for e in events):
            print(f"[done earlier] {order_id} was undone")
            return
        if not any(e["type"] == "failed" for e in events):
            try:
                run_logged_order(order_id, execute)
                return
            except ToolCallFailed as exc:
                if not exc.permanent:
                    raise
                done = succeeded(folder / f"{order_id}.jsonl")
                append_event(journal, {"type": "failed", "error": str(exc), "succeeded": done})
                events = read_events(journal)
        done = next(e["succeeded"] for e in events if e["type"] == "failed")
        compensated = {e["step"] for e in events if e["type"] == "compensated"}
        for step in undo_steps(done):
            if step not in compensated:
                result = compensate(order_id, step, keyed=keyed)
                append_event(journal, {"type": "compensated", "step": step, "result": result})
        append_event(journal, {"type": "undone"})
        print(f"[undone] {order_id}: {', '.join(undo_steps(done))}")


if __name__ == "__main__":
    agent_main(run)
