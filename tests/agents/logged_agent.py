"""A fixture agent: lesson 1's logged loop (decision before the effect, result after), each tool call
sent with a key made of the order and the step."""

from crashlab.agent import agent_main, call_tool
from crashlab.answers.lesson01 import run_logged_order


def execute(order_id: str, step: int, call: dict) -> dict:
    return call_tool(call["name"], call["input"], idempotency_key=f"{order_id}:{step}")


if __name__ == "__main__":
    agent_main(lambda order_id: run_logged_order(order_id, execute))
