"""Facades that name many things and import each only when asked (PEP 562): an agent process that uses the
Temporal client never loads the Restate one, and a lesson kernel that draws no heatmap never loads matplotlib.

A facade says what it names the way a type checker and import-linter read it, in an ``if TYPE_CHECKING:`` block of
plain ``from MODULE import NAME`` lines; :func:`lazy_exports` reads that block from the facade's own source and
imports each name from its module on first use. So the one list is the one the tools check: no second table to
keep in step with it, and no import import-linter cannot see.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable


def type_checking_imports(source: str) -> dict[str, str]:
    """``{name: module}`` for every ``from MODULE import NAME`` in the ``if TYPE_CHECKING:`` blocks of ``source``."""
    table: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if not (isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0):
                    raise ValueError(f"line {statement.lineno}: a facade's TYPE_CHECKING block holds only "
                                     "`from MODULE import NAME` lines")
                for alias in statement.names:
                    table[alias.asname or alias.name] = statement.module
    return table


def lazy_exports(namespace: dict[str, Any], table: dict[str, str] | None = None
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a facade module whose globals are ``namespace``: each name its
    ``if TYPE_CHECKING:`` block imports (or ``table`` maps to a module) is imported from that module on first use,
    then kept. Call it last in the facade (``__getattr__, __dir__ = lazy_exports(globals())``)."""
    if table is None:
        table = type_checking_imports(Path(namespace["__file__"]).read_text())

    def __getattr__(name: str) -> Any:
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
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


__all__ = ["lazy_exports", "lazy_module", "type_checking_imports"]
