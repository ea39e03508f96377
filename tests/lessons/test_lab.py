"""The JupyterLab that `make lab` opens: it starts (as root too, in a container), and shows learners no
instructor menus (nbgrader's formgrader, course list, assignment list) and no news popup."""

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
JUPYTER = Path(sys.executable).parent / "jupyter"
HIDDEN = ("@jupyter/nbgrader", "@jupyterlab/apputils-extension:announcements")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_starts_as_make_lab_starts_it_and_hides_the_instructor_menus(tmp_path):
    lab_command = subprocess.run(["make", "-s", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, check=True)
    args = lab_command.stdout.strip().splitlines()[-1].split()[2:]  # after ".venv/bin/jupyter lab"
    port, token = free_port(), "crashlab-test"
    lab = subprocess.Popen([str(JUPYTER), "lab", *args, "--no-browser", f"--ServerApp.port={port}",
                            f"--IdentityProvider.token={token}"],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        page = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and lab.poll() is None:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.3)
        assert page is not None and page.status_code == 200, \
            f"Lab did not serve /lab: {lab.poll()} {lab.stderr.read()[-800:] if lab.poll() is not None else ''}"
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      page.text, re.S).group(1))
        disabled = config.get("disabledExtensions", [])
        for name in HIDDEN:
            assert name in disabled, f"{name} is shown to learners: {disabled}"
        formgrader = httpx.get(f"http://127.0.0.1:{port}/formgrader?token={token}", timeout=5)
        assert formgrader.status_code == 404, "nbgrader's formgrader is served to learners"
    finally:
        lab.terminate()
        try:
            lab.wait(15)
        except subprocess.TimeoutExpired:
            lab.kill()
            lab.wait()


def test_every_notebook_opens_clean_on_the_kernel_make_setup_installs():
    """JupyterLab marks a notebook changed the moment it opens when the notebook's kernel display name differs from
    the installed kernel's: a learner would be asked to save a notebook they never touched. The name `make setup`
    gives the kernel, the name it has in this environment and every master's and student notebook's must agree."""
    import nbformat

    makefiles = [ROOT / "Makefile", ROOT / "shared" / "crashlab" / "release" / "templates" / "Makefile"]
    made = {re.search(r'ipykernel install .*--name (\S+) --display-name "([^"]+)"', m.read_text()) for m in makefiles}
    kernels = {m.groups() if m else None for m in made}
    assert len(kernels) == 1 and None not in kernels, f"the course's and the release's Makefiles disagree: {kernels}"
    [(name, display)] = kernels
    installed = Path(sys.prefix) / "share" / "jupyter" / "kernels" / name / "kernel.json"
    if installed.exists():
        assert json.loads(installed.read_text())["display_name"] == display, \
            f"{installed} is from an older `make setup`: run `python -m ipykernel install --sys-prefix --name {name} " \
            f"--display-name \"{display}\"` (or `make clean setup`)"
    notebooks = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "course").glob("*.ipynb"))
    assert len(notebooks) >= 18
    for path in notebooks:
        spec = nbformat.read(path, as_version=4).metadata.get("kernelspec", {})
        assert (spec.get("name"), spec.get("display_name")) == (name, display), (path.name, spec)
