"""Facades that name many things and import each only when asked (PEP 562): an agent process that uses the
Temporal client never loads the Restate one, and a lesson kernel that draws no heatmap never loads matplotlib."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(namespace: dict, table: dict[str, str]) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for a facade module whose globals are ``namespace``: each name in
    ``table`` is imported from the module it maps to on first use, then kept."""

    def __getattr__(name: str):
        try:
            where = table[name]
        except KeyError:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(where), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
