"""Answers written as cells rather than files (``def predict(...)`` in lesson 11), each a module of its own.

The judge calls these answers across the boundary like any other student module, so the grader writes
each answer cell into a module in the student's folder. One module per cell, not one for all: a cell that
still holds its placeholder (``raise NotImplementedError()``) or does not parse must cost its own exercise,
not every check of the lesson. Each module starts with the imports of the notebook's given cells (an answer
may use them) and what the answer cells before it define (a helper written in one cell may be used in the
next, as in the notebook), then runs its cell under the name ``answer cell 'GRADE_ID'`` -- so an error's
line is the cell's own line, and the learner reads which cell it is in.

:func:`write_answer_modules` runs in the grader, :func:`run_answer_cell` in the student's process (it is
what each module calls), and :func:`load_answer_cells` and :func:`why_undefined` in the judge.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

MODULE_PREFIX = "_notebook_answers_"


def module_name(gid: str) -> str:
    return MODULE_PREFIX + re.sub(r"\W", "_", gid)


def cell_name(gid: str) -> str:
    """How tracebacks and feedback name the cell."""
    return f"answer cell {gid!r}"


def plain_python(cell) -> bool:
    return cell.cell_type == "code" and not cell.source.lstrip().startswith("%")


def answer_cell(cell) -> bool:
    from crashlab.course.notebooks import is_answer_cell  # here: the student's process imports this module too

    return plain_python(cell) and is_answer_cell(cell)


def defined_names(source: str) -> list[str]:
    """The top-level names a cell defines (functions, classes, assigned names); none if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def given_imports(master) -> list[str]:
    """The import statements at the top level of the master's given (not answer) cells."""
    imports = []
    for cell in master.cells:
        if plain_python(cell) and not answer_cell(cell):
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            imports += [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return list(dict.fromkeys(imports))


def write_answer_modules(submission, master, workdir: Path) -> list[dict]:
    """One module in ``workdir`` per answer cell of ``submission`` that is not a file; for each, what the
    judge needs: ``{"cell": grade id, "module": name, "names": [...]}``. The names are the ones the master's
    cell defines (what the checks use) and the ones the student's defines; a cell that does not parse keeps
    the master's, so the check that uses them says why they are missing."""
    from crashlab.grading.isolation import write_new_file
    from crashlab.course.notebooks import grade_id

    master_names = {grade_id(c): defined_names(c.source) for c in master.cells if answer_cell(c)}
    imports = "\n".join(given_imports(master))
    cells: list[dict[str, Any]] = []
    earlier: list[str] = []
    for cell in submission.cells:
        gid = grade_id(cell)
        if not (answer_cell(cell) and gid):
            continue
        module = module_name(gid)
        text = (f'"""The notebook\'s {cell_name(gid)}, as a module of its own (written by the grader)."""\n'
                f"{imports}\nfrom crashlab.grading.answer_cells import run_answer_cell\n"
                f"run_answer_cell(globals(), {earlier!r}, {cell_name(gid)!r}, {cell.source!r})\n")
        write_new_file(workdir / f"{module}.py", text)
        names = list(dict.fromkeys(master_names.get(gid, []) + defined_names(cell.source)))
        cells.append({"cell": gid, "module": module, "names": names})
        earlier.append(module)
    return cells


def run_answer_cell(namespace: dict, earlier: list[str], name: str, source: str) -> None:
    """Run an answer cell in its module's ``namespace``, after what the earlier answer cells define. An
    earlier cell that fails leaves its names out; this cell fails only if it uses them."""
    for module in earlier:
        try:
            loaded = importlib.import_module(module)
        except Exception:  # noqa: BLE001 -- that cell's own check reports it
            continue
        namespace.update({k: v for k, v in vars(loaded).items() if not k.startswith("__")})
    exec(compile(source, name, "exec"), namespace)  # noqa: S102 -- the student's cell, in the student's process


def load_answer_cells(cells: list[dict], namespace: dict) -> dict[str, tuple[str, BaseException | None]]:
    """In the judge: import each answer cell's module (through the judge's proxy for student modules) and
    bind the names it defines in ``namespace``. Returns, for each name left unbound, its cell and the error
    that stopped the cell (None: the cell ran but does not define it)."""
    unbound: dict[str, tuple[str, BaseException | None]]
    unbound = {}
    for cell in cells:
        try:
            module, failure = importlib.import_module(cell["module"]), None
        except Exception as exc:  # noqa: BLE001 -- the student's cell failed: its checks say why
            module, failure = None, exc
        for name in cell["names"]:
            namespace.pop(name, None)  # nothing left from an earlier check's process
            try:
                if module is not None:
                    namespace[name] = getattr(module, name)
                    continue
            except AttributeError:
                pass
            unbound[name] = (cell["cell"], failure)
    return unbound


def why_undefined(exc: BaseException, unbound: dict, explain) -> str | None:
    """Words for a check that failed on a name its answer cell did not define; ``explain(error)`` words the
    cell's own error. None when ``exc`` is something else."""
    if not isinstance(exc, NameError) or getattr(exc, "name", None) not in unbound:
        return None
    gid, error = unbound[exc.name]
    if error is None:
        return f"the {cell_name(gid)} does not define {exc.name!r}"
    if isinstance(error, SyntaxError):  # the mistake is the syntax: say it first, the missing name after
        return f"a syntax error: {explain(error)}; so the {cell_name(gid)} did not run and {exc.name!r} is not defined"
    words = explain(error)
    if words.startswith("not answered yet"):  # the placeholder: the cause first, as everywhere else
        return f"{words}; so the {cell_name(gid)} did not run and {exc.name!r} is not defined"
    return f"the {cell_name(gid)} did not run, so {exc.name!r} is not defined: {words}"
