"""A fixture agent that retries inside its own process, as DBOS and Temporal agents do: lesson 1's keyed logged
loop, run again from its own log after any failure that may pass, until the order is done. It waits 1 s after the
charge, so that a world fault directed at the charge (``outage:8@charge_card``) meets it mid-order."""

import time

from crashlab.agent import CallFailed, WorldNotRunning, agent_main, call_tool
from crashlab.answers.lesson01 import run_logged_order


def execute(order_id: str, step: int, call: dict) -> dict:
    result = call_tool(call["name"], call["input"], idempotency_key=f"{order_id}:{step}")
    if call["name"] == "charge_card":
        time.sleep(1.0)
    return result


def run(order_id: str) -> None:
    while True:
        try:
            return run_logged_order(order_id, execute)
        except (CallFailed, WorldNotRunning) as exc:
            if isinstance(exc, CallFailed) and not exc.retryable:
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    agent_main(run)
