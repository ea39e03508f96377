"""A Lab for learning: ``python -m crashlab.release.learner_lab`` (the release's ``make setup`` runs it).

Learners grade nothing in Lab (``make check`` is their self-check), so nbgrader's instructor menus and server
extensions are turned off, and JupyterLab's news popup too. This writes, into the environment's own
``etc/jupyter``, the files that ``jupyter server extension disable --sys-prefix`` and ``jupyter labextension
disable|lock --level=sys_prefix`` write -- in one short process instead of three that each start Jupyter (some
five seconds apiece on a busy machine).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SERVER_EXTENSIONS = [f"nbgrader.server_extensions.{name}"
                     for name in ("formgrader", "validate_assignment", "assignment_list", "course_list")]
LAB_EXTENSIONS = ["@jupyter/nbgrader", "@jupyterlab/apputils-extension:announcements"]


def configure(prefix: Path) -> None:
    etc = prefix / "etc" / "jupyter"
    server = etc / "jupyter_server_config.d"
    server.mkdir(parents=True, exist_ok=True)
    for name in SERVER_EXTENSIONS:  # loaded after nbgrader.json, which turns them on, so these win
        (server / f"{name}.json").write_text(json.dumps({"ServerApp": {"jpserver_extensions": {name: False}}}, indent=2))
    page = etc / "labconfig" / "page_config.json"
    page.parent.mkdir(parents=True, exist_ok=True)
    config = json.loads(page.read_text()) if page.is_file() else {}
    for key in ("disabledExtensions", "lockedExtensions"):
        config.setdefault(key, {}).update({name: True for name in LAB_EXTENSIONS})
    page.write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    configure(Path(sys.prefix))
