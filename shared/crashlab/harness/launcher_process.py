"""The warm launcher's own process (``python -P -m crashlab.harness.launcher REQ_FD REP_FD MODULE...``): it imports
the heavy libraries once, then forks one child per request and reports each child's exit.

It sleeps until there is something to do: a request on its pipe, or a child's exit, which SIGCHLD announces
through a wakeup pipe (:func:`signal.set_wakeup_fd`). Polling instead cost each launcher about 1 % of a core while
it waited, and a lesson's kernel or a test run keeps several. The harness's side of the protocol is
:class:`crashlab.harness.launcher.WarmLauncher`.
"""

from __future__ import annotations

import json
import mmap
import os
import runpy
import select
import signal
import sys
import threading

HEADER = 8  # hex digits of a frame's length


def frame(data: bytes) -> bytes:
    """``data`` preceded by its length, as the launcher reads a request's header."""
    return f"{len(data):0{HEADER}x}".encode() + data


def _read_exact(fd: int, size: int) -> bytes:
    """``size`` bytes of the request pipe (b"" at its end): only ever a header, which holds no secret."""
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def _read_payload(fd: int, size: int) -> mmap.mmap:
    """A request's payload, read straight into a mapping of its own: the launcher unmaps it once it has forked,
    so no later child inherits it (a Python ``bytes`` would leave its copy in freed memory)."""
    region = mmap.mmap(-1, max(size, 1))
    view = memoryview(region)
    try:
        done = 0
        while done < size:
            count = os.readv(fd, [view[done:size]])
            if not count:
                raise EOFError("the request pipe closed in the middle of a request")
            done += count
    finally:
        view.release()
    return region


def _enter_netns(fd: int | None) -> None:
    """Join the network namespace ``fd`` names (the asking thread's, a grading's box): before anything else."""
    if fd is not None:
        import ctypes

        from crashlab.plumbing.sandbox_box import CLONE_NEWNET

        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "could not join the network namespace of the process that asked")
        os.close(fd)


def _open_outputs(request: dict) -> None:
    """stdout and stderr to the request's files, never through a planted link. The library's own module (a world's
    server) opens them with the file rights of the thread that asked, then takes root's back for its ledgers."""
    from crashlab.plumbing.sandbox_users import set_fs_ids

    module = request.get("module")
    previous = set_fs_ids(*request["fs_ids"]) if module and os.geteuid() == 0 and request.get("fs_ids") else None
    try:
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            keep = os.O_APPEND if fd == 2 and module else os.O_TRUNC
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | keep, 0o644)
            os.dup2(target, fd)
            os.close(target)
    finally:
        if previous is not None:
            set_fs_ids(*previous)


def _run_child(header: dict, payload: mmap.mmap, netns: int | None) -> None:
    """In the forked child: become the agent process, run the file as __main__, exit. Never returns."""
    code = 1
    try:
        request = {**header, **json.loads(payload[:header["payload"]] or b"{}")}
        payload.close()
        _enter_netns(netns)
        os.setsid()  # a session and process group of its own
        from crashlab.plumbing.sandbox import Sandbox, apply_limits

        if request.get("cgroup"):  # the run's mark, before it drops to the sandbox user (who could not join)
            from crashlab.world.runscope import join_cgroup

            join_cgroup(request["cgroup"])

        if request.get("sandbox"):
            Sandbox.from_json(request["sandbox"]).demote()  # never run a student's agent as root
        elif not request.get("module"):
            apply_limits()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        _open_outputs(request)
        import io

        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import tempfile

        tempfile.tempdir = None  # chosen again from this environment's TMPDIR, not the one the launcher cached
        if request.get("module"):
            sys.argv = [request["module"], *request["argv"]]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(request["argv"][0])
            sys.argv = [script, *request["argv"][1:]]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:  # the agent's own error: print it as ``python AGENT.py`` would
        import traceback

        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__, "<frozen runpy>"):
            tb = tb.tb_next  # the launcher's and runpy's frames: not the agent's
        traceback.print_exception(type(exc), exc, tb)  # none left for a syntax error: as the interpreter says it
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(req_fd: int, rep_fd: int, preload: list[str]) -> None:
    def send(message: dict) -> None:
        os.write(rep_fd, (json.dumps(message) + "\n").encode())

    error = _import_more(preload)
    send({"id": "ready", "ok": error is None, "error": error})
    if error:
        return
    children: set[int] = set()
    unsafe = None  # why forking this process is no longer safe (an import started a thread)
    wake = _wake_on_child_exit()
    own_netns = os.stat("/proc/self/ns/net").st_ino
    while True:
        # A child's exit writes to ``wake`` (even one that comes between the reaping below and this call); the
        # timeout is only a backstop.
        readable, _, _ = select.select([req_fd, wake], [], [], 5.0)
        if wake in readable:
            _drain(wake)
        if req_fd in readable:
            size = _read_exact(req_fd, HEADER)
            header = json.loads(_read_exact(req_fd, int(size, 16))) if size else None
            if not header:
                break
            payload = _read_payload(req_fd, int(header.get("payload") or 0))
            try:
                if "import" in header:
                    error = _import_more(header["import"])
                    unsafe = unsafe or (error if threading.active_count() > 1 else None)
                    send({"id": header["id"], "ok": error is None, "error": error})
                    continue
                if unsafe:
                    send({"id": header["id"], "error": unsafe})
                    continue
                netns = _netns_of(header, own_netns)
                if netns == -1:
                    send({"id": header["id"], "error": "cannot join the network namespace of the process that asked"})
                    continue
                pid = os.fork()
                if pid == 0:
                    _forget_wakeup(wake)
                    os.close(req_fd)
                    os.close(rep_fd)
                    _run_child(header, payload, netns)
                if netns is not None:
                    os.close(netns)
            finally:
                payload.close()  # unmapped: no later child inherits it
            children.add(pid)
            send({"id": header["id"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})
    for pid in children:  # the harness went away: take the children, and their process groups, with us
        _kill_group(pid)


def _netns_of(header: dict, own: int) -> int | None:
    """A descriptor of the asking thread's network namespace when it is not the launcher's own, opened while that
    thread waits for the reply (so it is the namespace it asked from); None when it is the same."""
    if not header.get("netns") or header.get("netns_id") in (None, own):
        return None
    try:
        return os.open(header["netns"], os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1  # never started in another namespace than the one it was asked from


def _import_more(names: list[str]) -> str | None:
    """Import modules into the launcher (and, with the SDK's facade, do the SDK's first-call work once here instead
    of in every agent process); why that failed, or None."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 -- said to the harness, which raises it as a LauncherError
            return f"cannot import {name}: {exc}"
    if "crashlab.agent" in names:
        try:
            sys.modules["crashlab.agent"].warm_up_sdk()
        except Exception:  # noqa: BLE001 -- only a saving: the agents do that work themselves
            pass
    if threading.active_count() > 1:
        return f"importing {names} started threads; forking is unsafe"
    return None


def _kill_group(pid: int) -> None:
    """SIGKILL ``pid`` and the process group it leads (each child, and the launcher, leads one of its own; a
    child just forked may not have made its group yet). Only for a child not yet reaped: its pid is still its own."""
    for kill in (os.kill, os.killpg):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _wake_on_child_exit() -> int:
    """The read end of a pipe that gets a byte whenever SIGCHLD comes (a Python handler must be set for
    :func:`signal.set_wakeup_fd` to write; it does nothing itself: the serve loop reaps)."""
    read, write = os.pipe()
    for fd in (read, write):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(write)
    return read


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _forget_wakeup(read: int) -> None:
    """In a forked child, before anything else: its signals must not write to the launcher's pipe (the fd
    number may soon be one of the agent's files), and SIGCHLD is back to its default for the agent's own children."""
    write = signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in (read, write):
        if fd >= 0:
            os.close(fd)
