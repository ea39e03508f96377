"""The environment variables through which the world, the harness and the grader tell an agent process where
things are. They live apart from the world so that an agent process, which reads them, never imports the world."""

import os
from pathlib import Path

from crashlab.errors import HOW_TO_START, WorldNotRunning

ENV_MODEL_URL = "CRASHLAB_MODEL_URL"        # the world's Messages API
ENV_SERVICES_URL = "CRASHLAB_SERVICES_URL"  # the world's payments, inventory and email services
ENV_STATE_DIR = "CRASHLAB_STATE_DIR"        # the folder where an agent keeps its durable state
ENV_PRIVATE_DIR = "CRASHLAB_PRIVATE_DIR"    # set by the grader: where worlds keep ledgers only trusted code reads


def state_dir() -> Path:
    """Where this agent keeps its durable state (set by the harness or ``World.env()``)."""
    value = os.environ.get(ENV_STATE_DIR)
    if not value:
        raise WorldNotRunning(f"{ENV_STATE_DIR} is not set; {HOW_TO_START}")
    path = Path(value)
    path.mkdir(parents=True, exist_ok=True)
    return path


__all__ = ["ENV_MODEL_URL", "ENV_PRIVATE_DIR", "ENV_SERVICES_URL", "ENV_STATE_DIR", "state_dir"]
