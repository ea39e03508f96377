"""The requirements registry: every graded check says which requirement of the exercise's text it checks.

Inside a graded check cell, a requirement marker is a comment line of its own::

    # [R1] read_events returns a list of dicts -- text: "Return the events (each a dict)"

The first line carrying an id *declares* it and ends with ``-- text: "PHRASE"``, a phrase of the
exercise's text (the markdown and answer cells after the previous graded check, up to this one; the
answer cells without their solution regions, which the learner never sees). A later ``# [R1]`` line,
with or without words, *resumes* it. Every ``assert`` and ``raise AssertionError`` belongs to the
most recent marker above it. A crash-matrix check in ``crashlab.matrix_checks`` states its requirement
in a ``"stated"`` key, a phrase of the notebook's markdown.

:func:`notebook_problems` walks a master and returns what is wrong, both ways: a check that tests
something no text states, and a stated requirement that no check covers. Phrases are compared
case-insensitively, with runs of whitespace collapsed and markdown backticks and asterisks removed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from crashlab.course.notebooks import grade_id, is_answer_cell, nbgrader_meta
from crashlab.course.metadata import lesson_meta

# The kinds of problem, one per way the registry can be broken.
UNSTATED_CHECK = "a check tests something no text states"
UNCHECKED = "stated but never checked"
BAD_DECLARATION = "a declaration without a phrase of the text"
UNDECLARED_RESUME = "a resumed requirement that was never declared"
UNSTATED_MATRIX = "a crash-matrix check that no text states"
UNPARSABLE = "a check cell that is not Python"

MARKER = re.compile(r"^\s*#\s*\[(R\d+)\](.*)$")
DECLARATION = re.compile(r"^(?P<words>.*?)\s*--\s*text:\s*(?P<quoted>.*?)\s*$")
QUOTED = re.compile(r'^"(?P<phrase>.*)"$')


@dataclass(frozen=True)
class Problem:
    notebook: str
    check: str  # a graded cell's grade_id, or a matrix check's name
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.notebook} {self.check}: {self.kind}: {self.message}"


@dataclass
class Requirement:
    rid: str
    line: int  # the declaration's line in the cell, 1-based
    words: str
    phrase: str | None
    asserts: list[int] = field(default_factory=list)


def normalize(text: str) -> str:
    """Lower case, no markdown backticks or asterisks, every run of whitespace one space."""
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", "")).strip().casefold()


def is_graded_cell(cell) -> bool:
    return cell.get("cell_type") == "code" and bool(nbgrader_meta(cell).get("grade"))


def visible_source(cell) -> str:
    """An answer cell as the learner sees it: without the lines of its solution regions."""
    lines, inside = [], False
    for line in cell.source.splitlines():
        if line.strip() == "# BEGIN SOLUTION":
            inside = True
        elif line.strip() == "# END SOLUTION":
            inside = False
        elif not inside:
            lines.append(line)
    return "\n".join(lines)


def exercise_texts(nb) -> dict[str, str]:
    """Each graded check cell's exercise text, by grade_id: the markdown cells and the answer cells
    (solution regions left out) after the previous graded check cell, up to this one."""
    texts: dict[str, str] = {}
    parts: list[str] = []
    for cell in nb.cells:
        if is_graded_cell(cell):
            texts[str(grade_id(cell))] = "\n\n".join(parts)
            parts = []
        elif cell.cell_type == "markdown":
            parts.append(cell.source)
        elif is_answer_cell(cell):
            parts.append(visible_source(cell))
    return texts


def assertion_lines(source: str) -> list[int]:
    """The lines (1-based) of every ``assert`` and ``raise AssertionError`` in a cell. IPython magics
    are blanked out first (line numbers kept); top-level ``await`` is allowed."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = compile(code, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | ast.PyCF_ONLY_AST)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            lines.append(node.lineno)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                lines.append(node.lineno)
    return sorted(lines)


def check_cell_requirements(source: str, text: str, notebook: str = "", check: str = "",
                            ) -> tuple[dict[str, Requirement], list[Problem]]:
    """The requirements a graded check cell declares (each with the lines of its asserts), and what is
    wrong with them against the exercise's ``text``."""
    problems: list[Problem] = []

    def problem(kind: str, message: str) -> None:
        problems.append(Problem(notebook, check, kind, message))

    lines = source.splitlines()
    try:
        asserts = assertion_lines(source)
    except SyntaxError as exc:
        problem(UNPARSABLE, f"line {exc.lineno}: {exc.msg}")
        return {}, problems
    markers = [(number, m.group(1), m.group(2).strip()) for number, line in enumerate(lines, start=1)
               if (m := MARKER.match(line))]
    declared_later: dict[str, int] = {}
    for number, rid, rest in markers:
        if DECLARATION.match(rest):
            declared_later.setdefault(rid, number)

    requirements: dict[str, Requirement] = {}
    owner_of: list[tuple[int, str]] = []  # (marker line, id), in order
    wanted = normalize(text)
    for number, rid, rest in markers:
        owner_of.append((number, rid))
        declaration = DECLARATION.match(rest)
        if declaration is None:  # a resume
            if rid in requirements:
                continue
            if declared_later.get(rid, 0) > number:
                problem(UNDECLARED_RESUME,
                        f"line {number} resumes [{rid}] before line {declared_later[rid]} declares it")
                continue
            if rest:
                problem(BAD_DECLARATION, f"line {number}: the first line carrying [{rid}] declares it and must end "
                                         f'with -- text: "PHRASE", a phrase of the exercise\'s text')
                requirements[rid] = Requirement(rid, number, rest, None)
            else:
                problem(UNDECLARED_RESUME, f"line {number} resumes [{rid}], which this cell never declares")
            continue
        if rid in requirements:
            problem(BAD_DECLARATION, f"line {number} declares [{rid}] again (first declared on line "
                                     f"{requirements[rid].line}): give each requirement its own id")
            continue
        quoted = QUOTED.match(declaration.group("quoted"))
        phrase = quoted.group("phrase") if quoted else None
        requirements[rid] = Requirement(rid, number, declaration.group("words"), phrase)
        if not phrase or not normalize(phrase):
            problem(BAD_DECLARATION, f'line {number}: [{rid}] needs -- text: "PHRASE" with a phrase in double quotes')
        elif normalize(phrase) not in wanted:
            problem(BAD_DECLARATION, f'line {number}: [{rid}] quotes "{phrase}", which is not in the exercise\'s text')

    for line in asserts:
        owners = [rid for number, rid in owner_of if number < line]
        if not owners:
            problem(UNSTATED_CHECK, f"line {line} checks something before any requirement marker: "
                                    f"{lines[line - 1].strip()[:100]}")
        elif owners[-1] in requirements:
            requirements[owners[-1]].asserts.append(line)
    for requirement in requirements.values():
        if not requirement.asserts:
            problem(UNCHECKED, f"[{requirement.rid}] (line {requirement.line}: {requirement.words or '...'}) "
                               "has no assert under it")
    return requirements, problems


def requirement_at(source: str, line: int) -> str | None:
    """The requirement a check cell's ``line`` checks, in words ("[R3] up to attempts calls"): the most
    recent marker above it, with the words of that id's declaration."""
    lines = source.splitlines()
    declared: dict[str, str] = {}
    current = None
    for number, text in enumerate(lines[:max(0, line - 1)], start=1):
        marker = MARKER.match(text)
        if marker is None:
            continue
        rid, rest = marker.group(1), marker.group(2).strip()
        declaration = DECLARATION.match(rest)
        declared.setdefault(rid, (declaration.group("words") if declaration else rest).strip())
        current = rid
    if current is None:
        return None
    return f"[{current}] {declared.get(current) or ''}".strip()


def first_requirement(source: str) -> str | None:
    """The first requirement a check cell checks, in words: what the cell's set-up above its first marker (a world
    started, an agent run) is preparing."""
    first = next((number for number, text in enumerate(source.splitlines(), start=1) if MARKER.match(text)), None)
    return None if first is None else requirement_at(source, first + 1)


def matrix_problems(nb, notebook: str = "") -> list[Problem]:
    """Each crash-matrix check must say, in ``stated``, a phrase of the notebook's markdown."""
    markdown = normalize("\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    problems = []
    for check in lesson_meta(nb).get("matrix_checks", []):
        name, stated = check.get("name", "?"), check.get("stated")
        if not isinstance(stated, str) or not normalize(stated):
            problems.append(Problem(notebook, name, UNSTATED_MATRIX, 'the matrix check has no "stated" phrase'))
        elif normalize(stated) not in markdown:
            problems.append(Problem(notebook, name, UNSTATED_MATRIX,
                                    f'"stated" quotes "{stated}", which is not in the notebook\'s markdown'))
    return problems


def registry(nb, notebook: str = "") -> tuple[dict[str, dict[str, Requirement]], list[Problem]]:
    """Every graded check cell's requirements, by grade_id, and every problem of the notebook."""
    texts = exercise_texts(nb)
    found: dict[str, dict[str, Requirement]] = {}
    problems: list[Problem] = []
    for cell in nb.cells:
        if is_graded_cell(cell):
            gid = str(grade_id(cell))  # a graded cell has one
            found[gid], cell_problems = check_cell_requirements(cell.source, texts[gid], notebook, gid)
            problems += cell_problems
    return found, problems + matrix_problems(nb, notebook)


def notebook_problems(nb, notebook: str = "") -> list[Problem]:
    return registry(nb, notebook)[1]


__all__ = ["Problem", "Requirement", "notebook_problems", "requirement_at", "first_requirement", "registry", "check_cell_requirements", "matrix_problems",
           "exercise_texts", "assertion_lines", "normalize", "UNSTATED_CHECK", "UNCHECKED", "BAD_DECLARATION",
           "UNDECLARED_RESUME", "UNSTATED_MATRIX", "UNPARSABLE"]
