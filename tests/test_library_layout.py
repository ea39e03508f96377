"""The library's house rules that a reader can count: no module over 400 lines (split it by concern instead), and a
docstring at the top of every module saying what it is for. The layers between the packages are import-linter's
contracts (pyproject.toml), checked by ``make lint``."""

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "shared" / "crashlab"
MODULES = sorted(LIBRARY.rglob("*.py"))


def test_the_library_is_found():
    assert len(MODULES) > 50, MODULES


def test_no_module_is_over_400_lines():
    long = {str(path.relative_to(LIBRARY)): n for path in MODULES
            if (n := len(path.read_text().splitlines())) > 400}
    assert long == {}, f"split these by concern: {long}"


def test_every_module_says_what_it_is_for():
    bare = [str(path.relative_to(LIBRARY)) for path in MODULES
            if path.stat().st_size and ast.get_docstring(ast.parse(path.read_text())) is None]
    assert bare == [], f"these modules have no docstring: {bare}"
