"""A lesson's worlds, one per scene: :func:`fresh_world` stops the world it started last and starts a fresh one, so
each scene's audit shows only that scene; :func:`stop_worlds` stops what is left (the grader's judge calls it after
a lesson's checks). Kept here, beside the world, so that whoever ends a lesson's kernel -- the notebook, the
judge -- stops the same worlds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from crashlab.world.control import World

_worlds: list[World] = []


def fresh_world(name: str, root: str | os.PathLike = ".crashlab", **options: Any) -> World:
    """Stop the world this helper started last, and start a fresh one in ``root/name``.

    Each scene of a lesson gets a clean world, so its audit shows only that scene. ``options`` go to
    :meth:`World.start` (``key_lifetime=2.0``, say).
    """
    stop_worlds()
    world = World.start(Path(root) / name, **options)
    _worlds.append(world)
    # The notebook's own process talks to this world too (call_tool from a cell, for instance).
    os.environ.update({key: value for key, value in world.env().items() if key.startswith("CRASHLAB_")})
    return world


def stop_worlds() -> None:
    while _worlds:
        _worlds.pop().stop()


__all__ = ["fresh_world", "stop_worlds"]
