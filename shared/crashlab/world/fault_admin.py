"""What the harness and a lesson ask a :class:`crashlab.world.World` about its faults: counted ones injected, a step
failing for good, a flaky spell, an order's requests held. A mixin of ``World`` (its class brings ``_admin``), kept
apart so that the world's life cycle and its faults grow separately.

    world.inject("lost_ack:charge_card")          # the charge commits, its reply never leaves
    world.fail_permanently("ORD-8842", "out_of_stock")
    world.flaky(20)                               # 20 s of 503s and 529s
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crashlab.order import check_order_id


def _is_seconds(arg) -> bool:
    try:
        return 0 <= float(arg) < 3600
    except (TypeError, ValueError):
        return False


def checked_order_id(what: str, order_id) -> None:
    """:func:`crashlab.order.check_order_id`, its error saying which call it came from."""
    try:
        check_order_id(order_id)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


class FaultAdmin:
    """The faults part of :class:`crashlab.world.World`."""

    if TYPE_CHECKING:  # what crashlab.world.World brings
        def _admin(self, method: str, path: str, **kwargs: Any) -> Any: ...

    def inject(self, fault: str, times: int = 1, arg: str | None = None, order_id: str | None = None) -> None:
        """Arm a fault: ``lost_ack:TOOL`` (commit, then drop the reply), ``latency:TOOL`` (arg: seconds in flight),
        ``refuse:TOOL`` (answer with the status in arg, 400 or 503 say, and do nothing), ``malformed_reply`` (arg:
        unknown_tool, missing_args or bad_type), ``parallel_tool_use`` (tools in one reply), ``cut_stream`` (a streamed
        reply's connection dropped after arg text deltas, 1 by default; the agent left alive), ``hold:TOOL`` (once
        TOOL's effect is committed, the order's later requests wait until :meth:`release_held`). TOOL may be an undo
        tool. With ``order_id`` only requests for that order meet it (and use it up); None: any order's.
        For a step that fails for good, see :meth:`fail_permanently`."""
        from crashlab.order import ALL_TOOLS
        from crashlab.world.policy import MODEL_FAULT_ARGS, MODEL_FAULTS

        kind, _, tool = fault.partition(":")
        if fault not in MODEL_FAULTS and (kind not in ("lost_ack", "latency", "refuse", "hold") or tool not in ALL_TOOLS):
            raise ValueError(f"unknown fault {fault!r}: lost_ack:TOOL, latency:TOOL, refuse:TOOL, hold:TOOL (TOOL one of "
                             f"{', '.join(ALL_TOOLS)}) or {' or '.join(MODEL_FAULTS)} -- an unknown fault would never fire")
        if kind == "latency" and not _is_seconds(arg):
            raise ValueError(f"{fault} needs arg= seconds in flight, such as '0.5', got {arg!r}")
        if fault in MODEL_FAULT_ARGS and not MODEL_FAULT_ARGS[fault][0](arg):
            raise ValueError(f"{fault} needs arg= {MODEL_FAULT_ARGS[fault][1]}, got {arg!r}")
        if fault.startswith("refuse:") and not (arg is None or (str(arg).isdigit() and 400 <= int(arg) <= 599)):
            raise ValueError(f"{fault} needs arg= an HTTP error status such as '400' or '503', got {arg!r}")
        if order_id is not None:
            checked_order_id("inject", order_id)
        self._admin("POST", "faults", json={"name": fault, "remaining": times, "arg": arg, "order_id": order_id})

    def fail_permanently(self, order_id: str, tool: str, reason: str | None = None) -> None:
        """Make every call of ``tool`` for ``order_id`` fail for good, until :meth:`clear_failure`: the card
        declined (``charge_card``: 402 ``card_declined``), the item out of stock (``reserve_item``: 422
        ``out_of_stock``), the address rejected (``send_confirmation``: 422 ``address_rejected``). The service
        does nothing and answers the error, whose ``type`` is the reason; an agent's ``ToolCallFailed`` says
        ``permanent`` and not ``retryable``. ``reason`` defaults to the tool's own. Kept in the control ledger, so
        it outlives a crash and a restart with ``--keep``. ``tool`` may also be ``TOOL:REASON`` or the reason alone
        (``world.fail_permanently("ORD-8842", "out_of_stock")``)."""
        from crashlab.order import check_failure

        checked_order_id("fail_permanently", order_id)
        try:
            tool, reason = check_failure(f"{tool}" if reason is None else f"{tool}:{reason}")
        except ValueError as exc:
            raise ValueError(f"fail_permanently: {exc}") from None
        self._admin("POST", "failures", json={"order_id": order_id, "tool": tool, "reason": reason})

    def clear_failure(self, order_id: str, tool: str | None = None) -> None:
        """Undo :meth:`fail_permanently` for ``tool`` of ``order_id`` (every tool with None). A key whose
        request got the failure keeps it, as a provider keeps a declined request's answer under its key."""
        from crashlab.order import FAILURE_REASONS

        checked_order_id("clear_failure", order_id)
        if tool is not None and tool not in FAILURE_REASONS:
            raise ValueError(f"clear_failure: {tool!r} is not a step that can fail for good ({', '.join(FAILURE_REASONS)})")
        self._admin("POST", "failures", json={"order_id": order_id, "tool": tool, "reason": None})

    def permanent_failures(self) -> list[dict]:
        """The permanent failures armed: ``[{"order_id", "tool", "reason"}, ...]``."""
        return self._admin("GET", "failures")["failures"]

    def flaky(self, seconds: float, status: int = 503, model_status: int | None = 529) -> None:
        """Make the world flaky for ``seconds``: every service request is answered ``status`` (503) and does nothing,
        every model request ``model_status`` (529, "overloaded"; None leaves the model alone) -- errors to retry, as
        from services up but failing. Then it recovers by itself; 0 ends it now. The end is a wall-clock time kept
        in the control ledger, so a world restarted meanwhile stays flaky until then."""
        def is_5xx(value) -> bool:
            return type(value) is int and 500 <= value <= 599

        if not _is_seconds(seconds) or not is_5xx(status) or not (model_status is None or is_5xx(model_status)):
            raise ValueError(f"flaky needs 0 <= seconds < 3600 and 5xx statuses (a 4xx is not retried), got "
                             f"seconds={seconds!r}, status={status!r}, model_status={model_status!r}")
        self._admin("POST", "flaky", json={"seconds": float(seconds), "status": status, "model_status": model_status})

    def release_held(self, order_id: str | None = None) -> None:
        """Let the requests a ``hold:TOOL`` fault holds for ``order_id`` (None: for every order) go on."""
        self._admin("POST", "release", json={"order_id": order_id})

    def held_requests(self) -> int:
        """How many requests a ``hold:TOOL`` fault holds now."""
        return int(self._admin("GET", "held")["waiting"])

    def flaky_state(self) -> dict:
        """``{"seconds_left": ..., "refused": N}``: N requests answered with an error while flaky, in all."""
        return self._admin("GET", "flaky")

    def faults_left(self) -> dict[str, int]:
        """How many times each armed fault will still fire (one order's is named ``NAME@ORDER``)."""
        return {f["name"]: int(f["remaining"]) for f in self._admin("GET", "faults")["faults"]}


__all__ = ["FaultAdmin", "checked_order_id"]
