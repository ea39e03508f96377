"""The chaos soak: many orders, SIGKILLs at random moments, racing resumers, a world that dies, then an audit.

The crash matrix kills an agent at named points, one at a time. The soak does what a bad day does:

0. One clean run of the agent (order ``ORD-SOAK-0000``) must finish; its wall time is the kill window, unless
   ``kill_window`` is given.
1. For each of N distinct orders (``ORD-SOAK-0001``, ...), start the agent and SIGKILL its process group at a
   random moment (uniform in ``0..kill_window`` seconds; a kill that comes after the run ended is not counted).
2. Start between A and B resume processes *at once*; in the first rounds each is killed at a random moment too,
   with even odds. Keep starting rounds of resumers until the world says the order finished, or ``max_rounds``
   rounds have run (rounds during which the world was down do not count).
3. Optional world faults: ``world-kill`` SIGKILLs the world's server mid-soak and restarts it on its own state;
   ``outage:SECONDS`` stops it for that long, then restarts it on its own state. Agents that were talking to it
   fail (an *agent error*, expected then), and later rounds resume them.
4. At the end every order is audited from the world's ledgers, never from what an agent said: duplicates,
   unfinished (*lost*) orders, repeated model calls.

Orders run ``jobs`` at a time against one world, kept apart by their ids. The soak passes when no order has a
duplicate effect and none is lost. Every process it starts is a real new process killed with a real SIGKILL
(forked from a warm launcher unless ``launcher="exec"``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from crashlab.audit import Audit
from crashlab.harness import _Running, start_agent
from crashlab.launcher import WarmLauncher
from crashlab.scratch import scratch_dir
from crashlab.world import World, WorldError

CALIBRATION_ORDER = "ORD-SOAK-0000"  # one clean run before the soak: it must finish, and it times the kill window
KILLED_ROUNDS = 2  # resume rounds whose processes may be killed too; later rounds run clean
MAX_ROUNDS = 12
WORLD_FAULTS = ("world-kill", "outage:SECONDS")


def order_ids(count: int) -> list[str]:
    """``ORD-SOAK-0001``, ``ORD-SOAK-0002``, ... (valid under :data:`crashlab.order.ORDER_ID_PATTERN`)."""
    return [f"ORD-SOAK-{n:04d}" for n in range(1, count + 1)]


def parse_resumers(text: str) -> tuple[int, int]:
    """``"2..3"`` -> (2, 3); ``"4"`` -> (4, 4). ValueError unless 1 <= A <= B."""
    low, dots, high = text.partition("..")
    try:
        a, b = int(low), int(high if dots else low)
    except ValueError:
        raise ValueError(f"expected A..B (whole numbers, such as 2..3) or one number, got {text!r}") from None
    if not 1 <= a <= b:
        raise ValueError(f"need 1 <= A <= B in A..B, got {text!r}")
    return a, b


def parse_world_faults(text: str) -> list[tuple[str, float]]:
    """``"world-kill,outage:8"`` -> ``[("world-kill", 0), ("outage", 8.0)]``; ValueError for anything else."""
    faults = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, colon, arg = item.partition(":")
        if name == "world-kill" and not colon:
            faults.append(("world-kill", 0.0))
        elif name == "outage" and colon:
            try:
                seconds = float(arg)
            except ValueError:
                seconds = float("nan")
            if not 0 < seconds < 3600:
                raise ValueError(f"outage:SECONDS needs a number of seconds between 0 and 3600, got {item!r}")
            faults.append(("outage", seconds))
        else:
            raise ValueError(f"unknown world fault {item!r}: use world-kill or outage:SECONDS, comma-separated")
    if not faults:
        raise ValueError("no world faults given: use world-kill or outage:SECONDS, comma-separated")
    return faults


# --- results ------------------------------------------------------------------------------------------------
@dataclass
class OrderResult:
    order_id: str
    processes: int = 0
    kills: int = 0
    rounds: int = 0
    errors: list[str] = field(default_factory=list)  # last line of each non-zero exit that was not our kill
    audit: Audit | None = None
    seconds: float = 0.0

    @property
    def duplicates(self) -> int:
        return self.audit.duplicates if self.audit else 0

    @property
    def lost(self) -> bool:
        return self.audit is None or not self.audit.finished

    @property
    def ok(self) -> bool:
        return not self.duplicates and not self.lost

    def why(self) -> str:
        problems = self.audit.describe_problems() if self.audit else ["not audited"]
        problems = [p for p in problems if "repeated model call" not in p]
        text = "; ".join(problems)
        if self.lost and self.errors:
            text += f" -- last agent error: {self.errors[-1]}"
        return f"{text} ({self.processes} processes, kills {self.kills}, resume rounds {self.rounds})"

    def as_dict(self) -> dict:
        return {"order_id": self.order_id, "processes": self.processes, "kills": self.kills, "rounds": self.rounds,
                "agent_errors": len(self.errors), "errors": self.errors[-3:], "seconds": round(self.seconds, 2),
                "audit": self.audit.as_dict() if self.audit else None, "ok": self.ok}


@dataclass
class SoakResult:
    agent: str
    settings: dict
    orders: list[OrderResult]
    world_kills: int
    outages: list[float]
    seconds: float

    processes = property(lambda self: sum(o.processes for o in self.orders))
    kills = property(lambda self: sum(o.kills for o in self.orders))
    duplicates = property(lambda self: sum(o.duplicates for o in self.orders))
    lost = property(lambda self: sum(o.lost for o in self.orders))
    agent_errors = property(lambda self: sum(len(o.errors) for o in self.orders))
    repeated_model_calls = property(lambda self: sum(o.audit.repeated_model_calls for o in self.orders if o.audit))

    @property
    def ok(self) -> bool:
        return bool(self.orders) and self.duplicates == 0 and self.lost == 0

    def figures(self) -> dict:
        return {"orders": len(self.orders), "processes": self.processes, "kills": self.kills,
                "world_kills": self.world_kills, "outages": len(self.outages), "duplicates": self.duplicates,
                "lost": self.lost, "repeated_model_calls": self.repeated_model_calls,
                "agent_errors": self.agent_errors, "seconds": round(self.seconds, 1)}

    def as_dict(self) -> dict:
        return {"agent": self.agent, "settings": self.settings, **self.figures(), "ok": self.ok,
                "failed": {o.order_id: o.why() for o in self.orders if not o.ok},
                "per_order": [o.as_dict() for o in self.orders]}

    def write_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.as_dict(), indent=2) + "\n")

    def __str__(self) -> str:
        s = self.settings
        faults = ", ".join(s["world_faults"]) or "none"
        lines = [f"soak of {Path(self.agent).name}: resumers {s['resumers']}, kills {s['kills']} "
                 f"(0-{s['kill_window']:g} s), world faults: {faults}, seed {s['seed']}"]
        outages = f" ({', '.join(f'{o:g} s' for o in self.outages)})" if self.outages else ""
        rows = [("orders", len(self.orders), ""),
                ("processes started", self.processes, ""),
                ("kills", self.kills, "SIGKILLs that hit a running agent"),
                ("world kills", self.world_kills, ""),
                ("world outages", len(self.outages), outages.strip()),
                ("duplicates", self.duplicates, "effects beyond the first, from the world's ledgers"),
                ("lost orders", self.lost, "not finished when the soak gave up on them"),
                ("repeated model calls", self.repeated_model_calls, "answers asked for again (a kill right after an "
                                                                  "answer costs one, unavoidably)"),
                ("agent errors", self.agent_errors, "non-zero exits other than our kills"
                 + ("; expected while the world is down" if self.world_kills or self.outages else "")),
                ("seconds", f"{self.seconds:.1f}", "")]
        lines += [f"  {name:<22}{value!s:>7}  {note}".rstrip() for name, value, note in rows]
        failed = [o for o in self.orders if not o.ok]
        if failed:
            lines.append(f"failed orders ({len(failed)}):")
            lines += [f"  - {o.order_id}: {o.why()}" for o in failed[:20]]
            if len(failed) > 20:
                lines.append(f"  ... and {len(failed) - 20} more (see --json)")
        lines.append("PASS: 0 duplicates, 0 lost orders" if self.ok else
                     f"FAIL: {self.duplicates} duplicate(s), {self.lost} lost order(s)")
        return "\n".join(lines)

    __repr__ = __str__


# --- the world, which faults may take down --------------------------------------------------------------------
class _SoakWorld:
    """The soak's one world. A fault kills or stops it and restarts it on its own state (``fresh=False``), on
    the same port when it can, so agents started before keep a valid address. While it is down, ``up`` is
    clear and everyone who needs it waits; ``generation`` counts the faults, so a round knows it met one."""

    def __init__(self, folder: Path, key_lease: float | None):
        self.folder, self.key_lease = folder, key_lease
        self.world = World.start(folder, key_lease=key_lease)
        self.up = threading.Event()
        self.up.set()
        self.generation = 0
        self.kills, self.outages = 0, []
        self._fault_lock = threading.Lock()
        self.closed = threading.Event()

    def env(self) -> dict:
        self.up.wait()
        return self.world.env()

    def audit(self, order_id: str, attempts: int = 20) -> Audit:
        for _ in range(attempts):
            self.up.wait()
            if self.closed.is_set():
                raise WorldError("the soak was stopped")
            try:
                return self.world.audit(order_id)
            except WorldError:  # it went down between the wait and the request
                time.sleep(0.2)
        raise WorldError(f"the world did not answer an audit of {order_id}")

    def fault(self, kind: str, seconds: float) -> None:
        with self._fault_lock:
            if self.closed.is_set():
                return
            self.up.clear()
            self.generation += 1
            world = self.world
            try:
                if kind == "world-kill":
                    os.kill(world.pid, signal.SIGKILL)  # no cleanup, no flush: its requests die mid-flight
                    self.kills += 1
                world.stop()  # reaps the killed server, or stops it (SIGTERM) for an outage
                if kind == "outage":
                    self.outages.append(seconds)
                    self.closed.wait(seconds)
                if not self.closed.is_set():  # (a soak that ends, by Ctrl-C say, restarts nothing)
                    self.world = self._restart(world.port)
            finally:
                self.up.set()

    def _restart(self, port: int) -> World:
        for attempt in range(10):  # the old port can take a moment to be free again
            try:
                return World.start(self.folder, fresh=False, port=port if attempt < 9 else 0,
                                   key_lease=self.key_lease)
            except WorldError:
                time.sleep(0.3)
        return World.start(self.folder, fresh=False, key_lease=self.key_lease)

    def abort(self) -> None:
        """Stop waiting for the world: the soak is ending (an error, Ctrl-C)."""
        self.closed.set()
        self.up.set()

    def stop(self) -> None:
        self.closed.set()
        with self._fault_lock:  # a fault under way ends at once, restarting nothing
            self.up.set()
            self.world.stop()


# --- one order ------------------------------------------------------------------------------------------------
class _Soak:
    def __init__(self, agent: Path, world: _SoakWorld, launcher, resumers: tuple[int, int], kills: bool,
                 kill_window: float, max_rounds: int, timeout: float, seed: int):
        self.agent, self.world, self.launcher = agent, world, launcher
        self.resumers, self.kills, self.kill_window = resumers, kills, kill_window
        self.max_rounds, self.timeout, self.seed = max_rounds, timeout, seed
        self.stopping = threading.Event()  # set on an error or Ctrl-C: every order ends at once, its processes killed

    def order(self, order_id: str) -> OrderResult:
        rng = random.Random(f"{self.seed}:{order_id}")  # the same choices for an order whatever the scheduling
        result = OrderResult(order_id)
        started = time.time()
        self._round(result, rng, count=1, kill_odds=1.0 if self.kills else 0.0)  # the first run, killed
        counted = 0
        while counted < self.max_rounds and not self.stopping.is_set():
            if counted:
                result.audit = self.world.audit(order_id)  # for the progress bar; the soak audits again at the end
                if result.audit.finished:
                    break  # (after at least one round of resumers: they must also leave a finished order alone)
            generation = self.world.generation
            odds = 0.5 if self.kills and counted < KILLED_ROUNDS else 0.0
            errors_before = len(result.errors)
            self._round(result, rng, count=rng.randint(*self.resumers), kill_odds=odds)
            result.rounds += 1
            if self.world.generation == generation:  # a round that met a world fault does not count
                counted += 1
            if len(result.errors) > errors_before:  # back off a little: a key may still be leased, say
                time.sleep(min(0.1 * 2 ** counted, 2.0))
        result.seconds = time.time() - started
        return result

    def _round(self, result: OrderResult, rng: random.Random, count: int, kill_odds: float) -> None:
        """Start ``count`` processes at once, kill each with probability ``kill_odds`` at a random moment,
        and wait for them all (each within the timeout)."""
        env = self.world.env()
        if self.stopping.is_set():
            return
        plan: list[tuple[_Running, float | None]] = []
        try:
            for _ in range(count):
                kill_at = rng.uniform(0, self.kill_window) if rng.random() < kill_odds else None
                running = start_agent(self.agent, _Env(env), result.order_id, launcher=self.launcher)
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
                    elif kill_at is not None and now >= kill_at:
                        running.kill()  # SIGKILL, the process group and everything below it
                        killed.add(id(running))
                    elif now >= running.started + self.timeout:
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

    def env(self, **extra) -> dict:
        return {**self._env, **extra}


# --- the soak -------------------------------------------------------------------------------------------------
def soak(agent: str | os.PathLike, orders: int | None = 20, *, resumers: tuple[int, int] = (2, 3),
         kills: str = "random", kill_window: float | None = None, world_faults: list[tuple[str, float]] = (),
         seconds: float | None = None, seed: int | None = None, jobs: int = 2, timeout: float = 60.0,
         max_rounds: int = MAX_ROUNDS, key_lease: float | None = None, launcher: str = "warm",
         preload: tuple[str, ...] = (), progress: bool | None = None) -> SoakResult:
    """Run the chaos soak (see the module's docstring) and audit every order. ``orders=None`` with ``seconds``
    starts orders until ``seconds`` have passed; with both, whichever ends first. ``kill_window=None``: the wall
    time of one clean run, measured first. ``progress``: a tqdm bar on stderr (default: when stderr is a
    terminal). ValueError if the clean run fails: a soak of an agent that cannot run an order says nothing."""
    agent = Path(agent).resolve()
    if not agent.is_file():
        raise FileNotFoundError(f"no agent file at {agent}")
    if kills not in ("random", "none"):
        raise ValueError("kills must be 'random' or 'none'")
    if orders is None and seconds is None:
        raise ValueError("give a number of orders, a number of seconds, or both")
    seed = random.randrange(1 << 30) if seed is None else seed
    cap = min(orders or 9999, 9999)
    fault_rng = random.Random(f"{seed}:world")
    settings = {"orders": orders, "seconds": seconds, "resumers": f"{resumers[0]}..{resumers[1]}", "kills": kills,
                "kill_window": None, "world_faults": [k if k == "world-kill" else f"{k}:{s:g}"
                                                             for k, s in world_faults],
                "seed": seed, "jobs": jobs, "timeout": timeout, "max_rounds": max_rounds, "launcher": launcher}
    # When each world fault fires: as order number k starts (spread over the soak), or at a time if there is no count.
    if orders is not None:
        at_order = {}
        for j, fault in enumerate(world_faults):
            at_order.setdefault(max(1, round((j + 1) * cap / (len(world_faults) + 1))), []).append(fault)
    show = sys.stderr.isatty() if progress is None else progress
    started = time.time()
    results: list[OrderResult] = []
    with scratch_dir("crashlab-soak-") as folder:
        world = _SoakWorld(folder / "world", key_lease)
        warm = WarmLauncher(preload) if launcher == "warm" else None
        fault_threads: list[threading.Thread] = []

        def fire(fault, delay):
            thread = threading.Thread(target=lambda: world.closed.wait(delay) or world.fault(*fault), daemon=True)
            thread.start()
            fault_threads.append(thread)

        try:
            clean = start_agent(agent, world.world, CALIBRATION_ORDER, launcher=warm or "exec").finish(timeout)
            if clean.returncode != 0 or not world.audit(CALIBRATION_ORDER).finished:
                why = "it hung" if clean.timed_out else clean.last_error_line()
                raise ValueError(f"a clean run of {agent.name} (order {CALIBRATION_ORDER}, no kills) did not finish the "
                                 f"order: {why}")
            if kill_window is None:
                kill_window = round(max(0.05, clean.seconds), 2)
            settings["kill_window"] = kill_window
            if orders is None:  # a timed soak: faults at fixed fractions of the time
                for j, fault in enumerate(world_faults):
                    fire(fault, (j + 1) * seconds / (len(world_faults) + 1))
            runner = _Soak(agent, world, warm or "exec", resumers, kills == "random", kill_window, max_rounds,
                           timeout, seed)
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
                                fire(fault, fault_rng.uniform(0, kill_window))
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
                result.audit = world.audit(result.order_id)
            if bar is not None:
                bar.close()
        finally:
            world.stop()
            if warm is not None:
                warm.close()
    return SoakResult(str(agent), settings, results, world.kills, world.outages, time.time() - started)


__all__ = ["soak", "SoakResult", "OrderResult", "order_ids", "parse_resumers", "parse_world_faults", "WORLD_FAULTS"]
