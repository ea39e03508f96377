"""Facades that name many things and import each only when asked (PEP 562): an agent process that uses the
Temporal client never loads the Restate one, and a lesson kernel that draws no heatmap never loads matplotlib."""

from __future__ import annotations

import importlib
import importlib.util
import sys
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


def lazy_module(name: str):
    """``name`` as a module that is imported on its first attribute (the standard library's ``LazyLoader``); the
    module itself if it is imported already. Any attribute loads it, ``__dict__`` included: code that scans
    ``sys.modules`` reading attributes loads it there."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


__all__ = ["lazy_exports", "lazy_module"]
