"""The Restate tests' one precondition: the server binary `make setup` installs. Without it they skip, saying so."""

import pytest

from crashlab.engines.restate import RestateServerError, restate_binary


def restate_or_skip() -> None:
    try:
        restate_binary()
    except RestateServerError as exc:
        pytest.skip(f"no Restate server: {exc}")
