"""nbval's kernels (tests/nbval_kernels.py): a start that lost a port is made again, any other death says how."""

from __future__ import annotations

import json
import socket
import sys

import pytest
from jupyter_client.connect import LocalPortCache

from nbval_kernels import KernelStartError, start_new_kernel


def test_a_kernel_whose_port_another_process_took_starts_again_on_fresh_ports(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()  # what another process does between jupyter_client's choice of the port and the kernel's bind
    port = taken.getsockname()[1]
    handed, find = [], LocalPortCache.find_available_port

    def first_the_taken_one(self, ip):
        handed.append(port if not handed else find(self, ip))
        return handed[-1]

    monkeypatch.setattr(LocalPortCache, "find_available_port", first_the_taken_one)
    try:
        km, kc = start_new_kernel(kernel_name="python3", startup_timeout=120)
    finally:
        taken.close()
    try:
        assert handed.count(port) == 1 and port not in km.ports  # the second start had five other ports
        kc.execute("1 + 1")
        assert kc.get_shell_msg(timeout=60)["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_kernel_that_dies_while_starting_says_how_it_ended(tmp_path, monkeypatch):
    spec = tmp_path / "kernels" / "dying"
    spec.mkdir(parents=True)
    code = "import sys; sys.stderr.write('no kernel here\\n'); sys.exit(3)"
    spec.joinpath("kernel.json").write_text(json.dumps({"argv": [sys.executable, "-c", code, "{connection_file}"],
                                                        "display_name": "dying", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    with pytest.raises(KernelStartError) as raised:
        start_new_kernel(kernel_name="dying", startup_timeout=60)
    said = str(raised.value)
    assert "Kernel died before replying" in said and "exited with code 3" in said and "no kernel here" in said, said
    assert "attempt 1 of" in said  # not a port taken: not started again
