"""The kernels nbval starts for the masters: a kernel that dies while starting says how it ended, and one that lost a
port to another process is started again on fresh ports.

nbval starts each notebook's kernel with its stderr sent to /dev/null, so a kernel that dies before it answers leaves
only "Kernel died before replying to kernel_info" on every cell of the notebook: no exit code, no signal, no last
words, nothing to tell a kill from a crash. Here the kernel's stderr goes to a file until it has answered, and a death
is reported with how the process ended and what it last wrote.

One death has a known cause that is nobody's fault: jupyter_client picks the kernel's five ports by binding port 0
and letting go, and ipykernel then binds each of them once (``ipykernel.kernelapp``: one attempt for a given port).
In between -- a second on a quiet machine, many on a loaded one -- any other process may take one of them: the
suite's own servers are handed ports picked the same way (PostgreSQL, Restate, Temporal's dev server, which also
picks its internal services' ports so), and every connection a process opens takes an ephemeral port from the same
range. The kernel then exits with "Address
already in use". That start, and only that one, is made again on fresh ports, as the course's own servers do
(:func:`crashlab.plumbing.ports.retry_on_taken_port`).
"""

from __future__ import annotations

import signal
import tempfile

ATTEMPTS = 3
PORT_TAKEN = "Address already in use"


class KernelStartError(RuntimeError):
    """nbval's kernel died or did not answer while starting; the message says how it ended."""


def ended(returncode: int | None) -> str:
    if returncode is None:
        return "was still running"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
    """``nbval.kernel.start_new_kernel``, with the kernel's stderr kept until it answers (see the module)."""
    from jupyter_client.manager import KernelManager
    from nbval.kernel import NbvalKernelspecManager

    for attempt in range(1, ATTEMPTS + 1):
        with tempfile.TemporaryFile() as err:  # the kernel keeps its own descriptor of it after we close ours
            km = KernelManager(kernel_name=kernel_name, kernel_spec_manager=NbvalKernelspecManager())
            km.start_kernel(**{**kwargs, "stderr": err})
            kc = km.client()
            kc.start_channels()
            try:
                kc.wait_for_ready(timeout=startup_timeout)
                return km, kc
            except RuntimeError as exc:
                process = getattr(km.provisioner, "process", None)
                returncode = process.poll() if process is not None else None
                kc.stop_channels()
                km.shutdown_kernel(now=True)
                err.seek(0)
                said = err.read().decode(errors="replace").strip()
                if PORT_TAKEN in said and attempt < ATTEMPTS:
                    continue
                last = "\n".join(said.splitlines()[-15:]) or "(nothing)"
                raise KernelStartError(f"{exc}: the kernel {ended(returncode)} (attempt {attempt} of {ATTEMPTS}); "
                                       f"its stderr ended with:\n{last}") from None
    raise AssertionError("unreachable")


def install() -> None:
    """Make nbval start its kernels this way (``nbval.kernel.RunningKernel`` calls the module's function), for
    this process: the suite's nbval run of the masters and any nbval run a test makes in it."""
    import nbval.kernel

    nbval.kernel.start_new_kernel = start_new_kernel
