"""The chaos soak: many orders, SIGKILLs at random moments, racing resumers, a world that dies, then an audit.

The crash matrix kills an agent at named points, one at a time. The soak does what a bad day does:

0. One clean run of the agent (order ``ORD-SOAK-0000``) must finish; its wall time is the kill window, unless
   ``kill_window`` is given.
1. For each of N distinct orders (``ORD-SOAK-0001``, ...), start the agent and SIGKILL its process group at a
   random moment (uniform in ``0..kill_window`` seconds; a kill that comes after the run ended is not counted).
2. Start between A and B resume processes *at once*; in the first rounds each is killed at a random moment too,
   with even odds. Keep starting rounds of resumers until the world says the order finished, or ``max_rounds``
   rounds have run (rounds during which the world was down do not count).
3. Optional world faults (:mod:`crashlab.soak.world`): ``world-kill`` SIGKILLs the world's server mid-soak and
   restarts it on its own state; ``outage:SECONDS`` stops it for that long, then restarts it on its own state;
   ``flaky:SECONDS`` keeps it up but answers every request 503 (the model 529) for that long. Agents that were
   talking to it may fail (an *agent error*, expected then), and later rounds resume them; rounds that met a
   fault do not count against an order. An agent that retries inside its process (DBOS, Temporal) is given
   time to outlive a fault of any length: its timeout counts only the time the world was up and well, so a
   120 s outage does not get it killed as hung before it can finish the order; and a process that is running
   when a fault begins is spared the kill its plan holds, so the retries inside it are what meets the fault. A
   fault directed with ``@TOOL`` (``outage:200@charge_card``) fires once the order it falls to has TOOL's effect.
   With ``may_undo`` an order may end cleanly undone instead of finished: a saga whose do steps give up after a
   time, soaked with an outage longer than that (it must still leave nothing taken).
   With ``fail`` (``reserve_item``, ``card_declined``...) that step fails for good for every order, the
   calibration run's included, and an order is done when it is cleanly undone rather than finished.
4. At the end every order is audited from the world's ledgers, never from what an agent said
   (:mod:`crashlab.soak.results`): duplicates, unfinished (*lost*) orders, effects that were not the order's own
   (each order has its own amount and SKU: :func:`crashlab.order.order_details`), repeated model calls.

Orders run ``jobs`` at a time against one world, kept apart by their ids. Servers the agent needs besides the
world (``needs=("temporal",)``: the Temporal dev server) start once
for the soak (:class:`crashlab.engines.needs.Needs`). The soak passes when no order has a duplicate effect, none is lost
and every effect is the order's own. Every process it starts is a real new process killed with a real SIGKILL
(forked from a warm launcher unless ``launcher="exec"``).
"""


from __future__ import annotations

import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from crashlab.harness import MAX_RESUMERS, RunningAgent, start_agent
from crashlab.harness.launcher import WarmLauncher
from crashlab.engines.needs import Needs, needs_of, preload_of
from crashlab.order import check_failure
from crashlab.plumbing.scratch import scratch_dir
from crashlab.soak.results import OrderResult, SoakResult
from crashlab.soak.world import WORLD_FAULTS, SoakWorld, WorldFault, fault_label, parse_world_faults

CALIBRATION_ORDER = "ORD-SOAK-0000"  # one clean run before the soak: it must finish, and it times the kill window
KILLED_ROUNDS = 2  # resume rounds whose processes may be killed too; later rounds run clean
MAX_ROUNDS = 12
MAX_ORDERS = 9999  # ORD-SOAK-0001 to ORD-SOAK-9999: four digits


def order_ids(count: int) -> list[str]:
    """``ORD-SOAK-0001``, ``ORD-SOAK-0002``, ... (valid under :data:`crashlab.order.ORDER_ID_PATTERN`; each has
    its own amount and SKU in the catalogue, :func:`crashlab.order.order_details`)."""
    return [f"ORD-SOAK-{n:04d}" for n in range(1, count + 1)]


def parse_resumers(text: str) -> tuple[int, int]:
    """``"2..3"`` -> (2, 3); ``"4"`` -> (4, 4). ValueError unless 1 <= A <= B <= :data:`MAX_RESUMERS`."""
    low, dots, high = text.partition("..")
    try:
        a, b = int(low), int(high if dots else low)
    except ValueError:
        raise ValueError(f"expected A..B (whole numbers, such as 2..3) or one number, got {text!r}") from None
    if not 1 <= a <= b:
        raise ValueError(f"need 1 <= A <= B in A..B, got {text!r}")
    if b > MAX_RESUMERS:
        raise ValueError(f"at most {MAX_RESUMERS} resumers at once, got {text!r}: a race needs two or three")
    return a, b


# --- one order ------------------------------------------------------------------------------------------------
class _Soak:
    def __init__(self, agent: Path, world: SoakWorld, launcher, resumers: tuple[int, int], kills: bool,
                 kill_window: float, max_rounds: int, timeout: float, seed: int, extra_env: dict, fail: str | None,
                 may_undo: bool = False):
        self.agent, self.world, self.launcher, self.extra_env, self.fail = agent, world, launcher, extra_env, fail
        self.may_undo = may_undo
        self.done: set[str] = set()  # orders whose rounds are over (a directed fault stops waiting for them)
        self.resumers, self.kills, self.kill_window = resumers, kills, kill_window
        self.max_rounds, self.timeout, self.seed = max_rounds, timeout, seed
        self.stopping = threading.Event()  # set on an error or Ctrl-C: every order ends at once, its processes killed

    def order(self, order_id: str) -> OrderResult:
        rng = random.Random(f"{self.seed}:{order_id}")  # the same choices for an order whatever the scheduling
        result = OrderResult(order_id, fail=self.fail, may_undo=self.may_undo)
        started = time.time()
        try:
            self._rounds(result, rng)
        finally:
            self.done.add(order_id)
        result.seconds = time.time() - started
        return result

    def _rounds(self, result: OrderResult, rng: random.Random) -> None:
        order_id = result.order_id
        if self.fail:
            self.world.fail_permanently(order_id, self.fail)
        self._round(result, rng, count=1, kill_odds=1.0 if self.kills else 0.0)  # the first run, killed
        counted = failing = 0
        while counted < self.max_rounds and not self.stopping.is_set():
            if result.rounds:
                result.audit = self.world.try_audit(order_id)  # for the bar; the soak audits again at the end
                if result.audit is not None and not result.lost:
                    break  # (after at least one round of resumers: they must also leave a finished order alone)
            generation = self.world.generation
            odds = 0.5 if self.kills and counted < KILLED_ROUNDS else 0.0
            errors_before = len(result.errors)
            self._round(result, rng, count=rng.randint(*self.resumers), kill_odds=odds)
            result.rounds += 1
            if self.world.calm_since(generation):  # a round that met a world fault does not count
                counted += 1
            failing = failing + 1 if len(result.errors) > errors_before else 0
            if failing:  # back off, more after each failing round: a key may still be leased, the world flaky
                time.sleep(min(0.1 * 2 ** failing, 2.0))

    def _round(self, result: OrderResult, rng: random.Random, count: int, kill_odds: float) -> None:
        """Start ``count`` processes at once, kill each with probability ``kill_odds`` at a random moment,
        and wait for them all (each within the timeout)."""
        env = self.world.env()
        if self.stopping.is_set():
            return
        plan: list[tuple[RunningAgent, float | None]] = []
        troubled = self.world.troubled_seconds()  # the timeout leaves out the time of faults from here on
        generation = self.world.generation  # a fault begun since spares the processes still running
        try:
            for _ in range(count):
                kill_at = rng.uniform(0, self.kill_window) if rng.random() < kill_odds else None
                running = start_agent(self.agent, _Env(env), result.order_id, extra_env=self.extra_env,
                                      launcher=self.launcher)
                result.processes += 1
                plan.append((running, None if kill_at is None else running.started + kill_at))
            killed, hung = set(), set()
            while any(r.running() for r, _ in plan):
                now = time.time()
                for running, kill_at in plan:
                    if not running.running():
                        continue
                    if self.stopping.is_set():
                        running.kill()
                    elif kill_at is not None and now >= kill_at and self.world.calm_since(generation):
                        running.kill()  # SIGKILL, the process group and everything below it
                        killed.add(id(running))
                    elif now >= running.started + self.timeout + self.world.troubled_seconds() - troubled:
                        running.kill()
                        hung.add(id(running))
                time.sleep(0.01)
        finally:
            runs = [(running, running.finish(5)) for running, _ in plan]  # kills anything still running
        for running, run in runs:
            if id(running) in hung:
                result.errors.append(f"hung: killed after the {self.timeout:g} s timeout")
            elif run.killed and id(running) in killed:
                result.kills += 1
            elif run.returncode != 0:  # (a kill that came after the process had ended is no kill)
                result.errors.append(run.last_error_line())


class _Env:
    """Stands in for a World in :func:`start_agent`: the environment of the world as it was at the round's start."""

    def __init__(self, env: dict):
        self._env = env

    def env(self, **extra: str) -> dict[str, str]:
        return {**self._env, **extra}


# --- the soak -------------------------------------------------------------------------------------------------
def soak(agent: str | os.PathLike, orders: int | None = 20, *, resumers: tuple[int, int] = (2, 3),
         kills: str = "random", kill_window: float | None = None, world_faults: Sequence[WorldFault | tuple[str, float]] = (),
         seconds: float | None = None, seed: int | None = None, jobs: int = 2, timeout: float = 60.0,
         max_rounds: int = MAX_ROUNDS, key_lease: float | None = None, launcher: str = "warm",
         preload: tuple[str, ...] = (), needs: tuple[str, ...] = (), progress: bool | None = None,
         fail: str | None = None, may_undo: bool = False, env: dict | None = None) -> SoakResult:
    """Run the chaos soak (see the module's docstring) and audit every order. ``orders=None`` with ``seconds``
    starts orders until ``seconds`` have passed; with both, whichever ends first. ``kill_window=None``: the wall
    time of one clean run, measured first. ``world_faults``: as :func:`parse_world_faults` returns them.
    ``needs``: servers to start for the agents besides the world (``"temporal"``), as a lesson's metadata names
    them. ``progress``: a tqdm bar on stderr (default: when stderr is a terminal). ``timeout``: seconds an agent
    process may run while the world is up and well (time under a world fault is not counted). ValueError if the
    clean run fails: a soak of an agent that cannot run an order says nothing. ``fail``: a step that fails for good
    for every order (``TOOL``, ``TOOL:REASON`` or ``REASON``), each of which must then end cleanly undone.
    ``may_undo``: an order may end cleanly undone instead of finished (counted apart), for a saga soaked with faults
    longer than its do steps' patience. ``env``: variables for every agent process (a budget scaled down, say)."""
    agent = Path(agent).resolve()
    if not agent.is_file():
        raise FileNotFoundError(f"no agent file at {agent}")
    if kills not in ("random", "none"):
        raise ValueError("kills must be 'random' or 'none'")
    if orders is None and seconds is None:
        raise ValueError("give a number of orders, a number of seconds, or both")
    if orders is not None and not 1 <= orders <= MAX_ORDERS:
        raise ValueError(f"orders must be between 1 and {MAX_ORDERS}, got {orders!r}")
    needs = needs_of(needs)  # a one-line ValueError for a server the course cannot start
    faults = [WorldFault(*fault) for fault in world_faults]
    for fault in faults:
        if fault.kind not in ("world-kill", "outage", "flaky", "pause"):
            raise ValueError(f"unknown world fault {fault.kind!r}: see parse_world_faults")
    if fail is not None:
        fail = "{}:{}".format(*check_failure(fail))  # ValueError in one line for a step that cannot fail for good
    seed = random.randrange(1 << 30) if seed is None else seed
    cap = orders or MAX_ORDERS
    fault_rng = random.Random(f"{seed}:world")
    settings = {"orders": orders, "seconds": seconds, "resumers": f"{resumers[0]}..{resumers[1]}", "kills": kills,
                "kill_window": None, "world_faults": [fault_label(*fault) for fault in faults],
                "needs": list(needs), "seed": seed, "jobs": jobs, "timeout": timeout, "max_rounds": max_rounds,
                "launcher": launcher, "fail": fail, "may_undo": may_undo, "env": dict(env or {})}
    # When each world fault fires: as order number k starts (spread over the soak), or at a time if there is no count.
    if orders is not None:
        at_order: dict[int, list[WorldFault]] = {}
        for j, fault in enumerate(faults):
            at_order.setdefault(max(1, round((j + 1) * cap / (len(faults) + 1))), []).append(fault)
    show = sys.stderr.isatty() if progress is None else progress
    started = time.time()
    results: list[OrderResult] = []
    with scratch_dir("crashlab-soak-") as folder, Needs(folder / "servers") as servers:
        extra_env = {**servers.env_for({"needs": list(needs)}), **(env or {})}  # the servers start first
        world = SoakWorld(folder / "world", key_lease)
        warm = None
        fault_threads: list[threading.Thread] = []

        def fire(fault, delay, order_id=None):
            """The fault after ``delay``; a directed one once ``order_id`` has its tool's effect (never, if the order
            ends without it: the summary says so). The world holds the order's next request from the effect on,
            until the fault has begun: the agent cannot finish the order while this thread is yet to look."""
            if fault.after is not None:
                world.hold(order_id, fault.after)

            def when_due():
                if fault.after is None:
                    world.closed.wait(delay)
                else:
                    while not (world.closed.is_set() or world.effect_seen(order_id, fault.after)):
                        if order_id in runner.done:
                            world.unfired.append(fault_label(*fault))
                            return
                        world.closed.wait(0.1)
                if not world.closed.is_set():
                    world.fault(*fault, held=order_id if fault.after is not None else None)
            thread = threading.Thread(target=when_due, daemon=True)
            thread.start()
            fault_threads.append(thread)

        try:
            warm = WarmLauncher((*preload, *preload_of(needs))) if launcher == "warm" else None
            if fail:
                world.world.fail_permanently(CALIBRATION_ORDER, fail)
            clean = start_agent(agent, world.world, CALIBRATION_ORDER, extra_env=extra_env,
                                launcher=warm or "exec").finish(timeout)
            calibration = OrderResult(CALIBRATION_ORDER, audit=world.audit(CALIBRATION_ORDER), fail=fail)
            # what an order costs with nothing wrong
            settings["clean_model_calls"] = calibration.audit.model_calls if calibration.audit is not None else None
            if clean.returncode != 0 or calibration.lost:
                verdict = calibration.audit.verdict if calibration.audit is not None else "unaudited"
                why = "it hung" if clean.timed_out else clean.last_error_line() or f"the order is {verdict}"
                raise ValueError(f"a clean run of {agent.name} (order {CALIBRATION_ORDER}, no kills) did not "
                                 f"{'undo' if fail else 'finish'} the order: {why}")
            if kill_window is None:
                kill_window = round(max(0.05, clean.seconds), 2)
            settings["kill_window"] = kill_window
            runner = _Soak(agent, world, warm or "exec", resumers, kills == "random", kill_window, max_rounds,
                           timeout, seed, extra_env, fail, may_undo)
            if orders is None and seconds is not None:
                # a timed soak: faults at fixed fractions of the time; a directed one, order j's
                for j, fault in enumerate(faults):
                    fire(fault, (j + 1) * seconds / (len(faults) + 1), order_ids(j + 1)[-1])
            bar = None
            if show:
                from tqdm import tqdm

                bar = tqdm(total=orders and cap, desc=f"soak: {agent.name}", unit="order", file=sys.stderr,
                           dynamic_ncols=True)
            slots = threading.Semaphore(jobs)
            done_lock = threading.Lock()
            so_far = {"kills": 0, "dup": 0, "lost": 0}

            def finished(future):
                slots.release()
                if bar is not None and not future.cancelled() and not future.exception():
                    order = future.result()
                    with done_lock:
                        so_far["kills"] += order.kills
                        so_far["dup"] += order.duplicates
                        so_far["lost"] += order.lost
                        bar.set_postfix(so_far, refresh=False)
                        bar.update(1)

            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = []
                try:
                    for number, order_id in enumerate(order_ids(cap), start=1):
                        slots.acquire()
                        if number > 1 and seconds is not None and time.time() - started >= seconds:
                            slots.release()
                            break
                        if orders is not None:
                            for fault in at_order.get(number, []):
                                fire(fault, fault_rng.uniform(0, kill_window), order_id)
                        future = pool.submit(runner.order, order_id)
                        future.add_done_callback(finished)
                        futures.append(future)
                    results[:] = [f.result() for f in futures]
                except BaseException:
                    runner.stopping.set()
                    world.abort()
                    for future in futures:
                        future.cancel()
                    raise
            for thread in fault_threads:
                thread.join()
            for result in results:  # judged only from the world's ledgers, once nothing is running
                result.audit = world.try_audit(result.order_id, attempts=50)
            if bar is not None:
                bar.close()
        finally:
            world.stop()
            if warm is not None:
                warm.close()
    return SoakResult(str(agent), settings, results, world.kills, world.outages, time.time() - started,
                      world.flaky, world.flaky_refused, world_deaths=world.deaths, unaudited=world.unaudited,
                      unfired=world.unfired, fault_log=world.fault_log, pauses=world.pauses)


__all__ = ["soak", "SoakResult", "OrderResult", "order_ids", "parse_resumers", "parse_world_faults", "WORLD_FAULTS",
           "CALIBRATION_ORDER", "MAX_ORDERS"]
