"""The library's house rules that a reader can count: no module over 400 lines (split it by concern instead), and a
docstring at the top of every module saying what it is for. The layers between the packages are import-linter's
contracts (pyproject.toml), checked by ``make lint``."""

import ast
import re
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


# What writing or reading a crash point's text looks like in code: a point or an OP formatted from its parts, the
# grammar's pieces used as literals to match or split on. Prose (a docstring's ``after:model#N``) is none of these.
POINT_GRAMMAR = re.compile("|".join([
    r"\b(before|mid|after)\s*:\s*\{",          # f"after:{tool}"
    r"@chunk\{",                                # f"mid:model#{n}@chunk{k}", a point inside a stream
    r"model#\{",                                # f"model#{n}"
    r"\{\s*when\s*\}\s*:",                       # f"{when}:{op}"
    r"[\"']:?model#[\"']",                       # ":model#" or "model#", matched or split on
    r"\.startswith\(\s*f?[\"'](before|after)\b",  # .startswith("after:...")
    r"\}\s\+\s\{",                                # f"{first} + {then}", a double crash's label
    r"(split|partition)\(\s*[\"']\s*\+",          # label.split(" + ")
]))


def test_no_module_but_crash_points_writes_or_reads_a_point():
    """A crash point is one type (crashlab.crash_points): everyone else builds, compares and labels points through it,
    so a new kind of point is a change in one module (and the world's site that fires it)."""
    found = [f"{path.relative_to(LIBRARY)}:{n}: {line.strip()}" for path in MODULES if path.name != "crash_points.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if POINT_GRAMMAR.search(line)]
    assert found == [], "crash points written or read outside crashlab.crash_points:\n" + "\n".join(found)


def test_the_grammar_check_finds_what_it_looks_for():
    for line in ['label = f"{point} + {then}"', 'op = f"model#{n}"', 'point = f"{when}:{op}"',
                 'if ":model#" not in self.point:', 'return 1 if point.startswith("after:model#") else 0',
                 'firsts = [f"before:{tool}", f"after:{tool}"]', 'point = f"mid:{op}@chunk{k}"']:
        assert POINT_GRAMMAR.search(line), line
    for line in ['"""one at ``after:model#N``"""', 'ALLOWED_REPEAT = "one at after:model#N"', 'kind, _, tool = x.partition(":")']:
        assert not POINT_GRAMMAR.search(line), line


def _exception_classes() -> dict[str, list[str]]:
    """Every class the library defines whose bases name an exception (by name: the library's own, or a builtin)."""
    found: dict[str, list[str]] = {}
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                         for b in node.bases]
                found[node.name] = bases
    return found


def test_every_error_the_library_raises_is_under_one_root_drawn_in_its_docstring():
    """One root, CrashlabError, so a command catches one family; the tree in crashlab.errors' docstring names each
    (a stand-in for what a student's code raised is the one error outside it, on purpose)."""
    import crashlab.errors

    classes = _exception_classes()

    def under_root(name: str, seen: frozenset = frozenset()) -> bool:
        return name == "CrashlabError" or (name not in seen and any(under_root(base, seen | {name})
                                                                     for base in classes.get(name, [])))

    def is_error(name: str, seen: frozenset = frozenset()) -> bool:
        return name in ("Exception", "RuntimeError", "ValueError") or (name not in seen and any(
            is_error(base, seen | {name}) for base in classes.get(name, [])))

    errors = {name for name in classes if is_error(name)}
    outside = sorted(n for n in errors if not under_root(n))
    assert outside == ["StudentCodeError"], f"errors outside the CrashlabError tree: {outside}"
    undrawn = sorted(n for n in errors if under_root(n) and n not in crashlab.errors.__doc__)
    assert undrawn == [], f"under CrashlabError but not in crashlab.errors' tree: {undrawn}"
