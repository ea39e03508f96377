"""The workflow of the Temporal compensating agent: lesson 5's order loop as a saga. After each activity that
succeeds, the compensation that undoes it goes on a list; when an activity fails with a non-retryable
ApplicationError (a step that failed for good), the except block runs the list in reverse. The cancellation is
put on the list first, so it runs last: every undo ends with it, and an email cannot be unsent. The history
holds every activity's outcome, so a replay after a crash takes the same branch and re-runs only the
interrupted compensation, under its key. The code, not the model, decides to undo."""
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from crashlab.agent import first_tool_use, order_task, tool_result_message
    from saga_activities import ask_model, compensate, run_tool

RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2,
                    maximum_interval=timedelta(seconds=2), maximum_attempts=0,  # 0: no limit on attempts
                    non_retryable_error_types=["MalformedToolCall"])
GIVE_UP = timedelta(minutes=10)
UNDOES = {"charge_card": "refund_charge", "reserve_item": "release_item"}  # a confirmation: the cancellation


@workflow.defn(name="OrderSagaWorkflow")
class OrderSagaWorkflow:
    def __init__(self) -> None:
        self.status = "starting"
        self.done: list[str] = []

    @workflow.run
    async def run(self, order: dict) -> dict:
        model_timeout = timedelta(seconds=order.get("model_timeout_s", 3))
        tool_timeout = timedelta(seconds=order.get("tool_timeout_s", 2))
        messages = [{"role": "user", "content": order_task(order["order_id"])}]
        compensations = ["send_cancellation"]  # first on the list, so last to run
        try:
            for _turn in range(10):
                self.status = "asking the model"
                reply = await workflow.execute_activity(ask_model, messages, start_to_close_timeout=model_timeout,
                                                        schedule_to_close_timeout=GIVE_UP, retry_policy=RETRY)
                messages.append({"role": "assistant", "content": reply["content"]})
                if reply["stop_reason"] != "tool_use":
                    self.status = "done"
                    return {"status": "done", "done": self.done, "final": reply["content"][0]["text"]}
                call = first_tool_use(reply["content"])
                self.status = f"running {call['name']}"
                result = await workflow.execute_activity(run_tool, args=[call["name"], call["input"]],
                                                         start_to_close_timeout=tool_timeout,
                                                         schedule_to_close_timeout=GIVE_UP, retry_policy=RETRY)
                self.done.append(call["name"])
                if call["name"] in UNDOES:
                    compensations.append(UNDOES[call["name"]])
                messages.append(tool_result_message(call["id"], result))
            raise ApplicationError("the model did not finish the order in 10 turns", non_retryable=True)
        except ActivityError as err:
            failure = err.cause
            if not (isinstance(failure, ApplicationError) and failure.non_retryable):
                raise
            undone = []
            for step in reversed(compensations):
                self.status = f"undoing: {step}"
                await workflow.execute_activity(compensate, step, start_to_close_timeout=tool_timeout,
                                                schedule_to_close_timeout=GIVE_UP, retry_policy=RETRY)
                undone.append(step)
            self.status = "undone"
            return {"status": "undone", "done": self.done,
                    "final": f"undone ({failure.type}: {failure.message}): {', '.join(undone)}"}

    @workflow.query
    def state(self) -> dict:
        return {"status": self.status, "done": list(self.done)}
