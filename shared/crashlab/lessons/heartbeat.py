"""A lesson cell that waits says so: after :data:`EVERY_S` seconds with no output, one line naming the cell's line
it is on, and another each :data:`EVERY_S` seconds after that, until the cell writes something itself or ends.

A learner who runs a cell and sees nothing for half a minute cannot tell a slow machine from a hung cell. Most long
waits in the lessons show a progress bar (a crash matrix, the benchmark); the rest -- a visible check that crashes
and resumes an agent twice, a server that takes its time to stop on a loaded machine -- get these lines, from one
place, without a line of progress code in each cell::

    … 10 s into the cell, on line 3: row = crash_row(agent, "before:reserve_item", workdir=".crashlab/lesson04", …

They are written only where the cell writes text anyway -- in a visible check (which ends by saying it passed), in a
cell that has printed something already -- or where no one compares its outputs (a master's cell marked
``# NBVAL_IGNORE_OUTPUT``), and never into a line the cell has left open (``resuming ... ``), which says by itself
that something is going on. A cell whose output is a figure or a progress bar alone keeps that
shape; how long it waited is the only thing a line here would change. The lines start with ``… `` (an ellipsis and a
space), and the masters' output comparison (``tests/nbval-sanitize.cfg``) drops them: how many a run writes depends
on the machine.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
import time

from crashlab.lessons.words import CELL_FILE, VISIBLE_CHECK
from crashlab.plumbing.lines import LINE_WIDTH

EVERY_S = float(os.environ.get("CRASHLAB_HEARTBEAT_S", "5"))  # the tests shorten it
IGNORED_OUTPUT = "# NBVAL_IGNORE_OUTPUT"  # a master's cell whose outputs nbval does not compare: any shape will do
SHOWN = {"stream", "display_data", "update_display_data", "execute_result", "clear_output", "comm_msg", "error"}
WIDTH = LINE_WIDTH


class Heartbeat:
    """One per kernel: told when a cell starts and ends (IPython's ``pre_run_cell`` and ``post_run_cell``) and of every
    message the kernel sends its front end (the session's ``send``), it writes a line after each stretch of silence."""

    def __init__(self, every: float = EVERY_S):
        self.every = every
        self.lock = threading.Lock()
        self.started = self.last_output = 0.0
        self.running = self.may_write = self.open_line = False
        self.main = threading.main_thread().ident
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    # --- told by the kernel -----------------------------------------------------------------------------------------
    def cell_started(self, info) -> None:
        with self.lock:
            self.started = self.last_output = time.monotonic()
            self.running, self.open_line = True, False
            cell = (getattr(info, "raw_cell", None) or "").lstrip()
            self.may_write = bool(VISIBLE_CHECK.match(cell)) or IGNORED_OUTPUT in cell
        if self.thread is None:
            self.thread = threading.Thread(target=self._watch, name="crashlab-heartbeat", daemon=True)
            self.thread.start()
        self.wake.set()

    def cell_ended(self, result=None) -> None:
        with self.lock:
            self.running = False

    def sent(self, msg: dict) -> None:
        kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        if kind in SHOWN:
            content = msg.get("content", {})
            with self.lock:
                self.last_output = time.monotonic()
                if kind == "stream" and content.get("name") == "stdout":
                    self.may_write = True
                    # a line the cell left open ("resuming ... ") is its own sign of progress, and a line of ours
                    # written into it could not be told from the cell's text
                    self.open_line = not str(content.get("text", "")).endswith("\n")

    # --- the watcher -------------------------------------------------------------------------------------------------
    def _watch(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            while True:
                with self.lock:
                    if not self.running:
                        break
                    due = self.last_output + self.every - time.monotonic()
                    line = None
                    if due <= 0 and self.may_write and not self.open_line:
                        line = f"… {time.monotonic() - self.started:.0f} s into the cell{self.where()}"
                        if len(line) > WIDTH:  # the code it quotes is cut, so that the line fits the notebook
                            line = line[:WIDTH - 1] + "…"
                        self.last_output = time.monotonic()  # and again once its message goes out
                        due = self.every
                if line:  # not under the lock: the kernel's output thread takes it to say the line went out
                    print(line)
                time.sleep(min(max(due, 0.2), 1.0))

    def where(self) -> str:
        """``, on line N: CODE``: the running cell's own line that the kernel's main thread is in now -- the outermost
        frame of a cell's code, not a helper that an earlier cell defined -- or empty (a cell that awaits)."""
        frame, line = (None if self.main is None else sys._current_frames().get(self.main)), None
        while frame is not None:
            if CELL_FILE.search(frame.f_code.co_filename):
                line = frame.f_code.co_filename, frame.f_lineno
            frame = frame.f_back
        if line is None:
            return ""
        code = linecache.getline(*line).strip()
        if len(code) > WIDTH:
            code = code[:WIDTH - 1] + "…"
        return f", on line {line[1]}: {code}" if code else f", on line {line[1]}"


def install(shell) -> Heartbeat | None:
    """Start the heartbeat in this IPython kernel (once); None outside a kernel."""
    kernel = getattr(shell, "kernel", None)
    session = getattr(kernel, "session", None)
    if session is None:
        return None
    heartbeat = Heartbeat()
    send = session.send

    def told(stream, msg_or_type, *args, **kwargs):
        result = send(stream, msg_or_type, *args, **kwargs)
        try:
            heartbeat.sent(msg_or_type if isinstance(msg_or_type, dict) else
                           {"msg_type": msg_or_type, "content": (args[0] if args else kwargs.get("content")) or {}})
        except Exception:  # noqa: BLE001 -- a progress line is never worth a kernel's message
            pass
        return result

    session.send = told
    shell.events.register("pre_run_cell", heartbeat.cell_started)
    shell.events.register("post_run_cell", heartbeat.cell_ended)
    return heartbeat
