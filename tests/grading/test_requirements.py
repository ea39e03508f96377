"""The requirements registry, checked both ways: every graded check belongs to a requirement the exercise's
text states, and every requirement a check cell declares has a check (see crashlab.grading.requirements)."""

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from crashlab.grading.requirements import (BAD_DECLARATION, UNCHECKED, UNDECLARED_RESUME, UNSTATED_CHECK,
                                           UNSTATED_MATRIX, notebook_problems, registry)

ROOT = Path(__file__).resolve().parents[2]
MASTERS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.stem)
def test_every_check_is_stated(master):
    problems = notebook_problems(nbformat.read(master, as_version=4), master.name)
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(map(str, problems))


# --- the walker, on small synthetic notebooks ------------------------------------------------------------------
def _meta(gid, *, grade, solution):
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": not solution, "grade_id": gid}
    return {"nbgrader": {**meta, "points": 1} if grade else meta}


def synthetic(check: str, *, text="Return a **non-empty** `str`.\nIt must not call the model.",
              answer="def f():\n    # a comment the learner sees\n    # BEGIN SOLUTION\n"
                     "    return 'the hidden answer'\n    # END SOLUTION\n", matrix=None, before=()):
    cells = [*before, new_markdown_cell(text),
             new_code_cell(answer, metadata=_meta("ex1", grade=False, solution=True)),
             new_code_cell(check, metadata=_meta("ex1_checks", grade=True, solution=False))]
    return new_notebook(cells=cells, metadata={"crashlab": {"lesson": "99", "matrix_checks": matrix or []}})


def kinds(nb):
    return [p.kind for p in notebook_problems(nb, "synthetic.ipynb")]


CLEAN = '''# Exercise 1: visible checks
x = f()
# [R1] f returns a non-empty string -- text: "return a non-empty str"
assert type(x) is str
assert x
# BEGIN HIDDEN TESTS
# [R2] no model call -- text: "It  must NOT call the model"
if False:
    raise AssertionError("it called the model")
# [R1] again, in the hidden part
assert x.strip()
# END HIDDEN TESTS
'''


def test_a_clean_check_cell_has_no_problem_and_its_asserts_are_grouped():
    nb = synthetic(CLEAN, matrix=[{"name": "ex1_matrix", "agent": "a.py", "points": 1, "stated": "must not call"}])
    found, problems = registry(nb)
    assert problems == []
    assert {rid: len(r.asserts) for rid, r in found["ex1_checks"].items()} == {"R1": 3, "R2": 1}


def test_the_answer_cell_outside_its_solution_regions_is_text_too():
    check = CLEAN.replace('-- text: "return a non-empty str"', '-- text: "a comment the learner sees"')
    assert kinds(synthetic(check)) == []


def test_magics_and_top_level_await_parse():
    check = "%load_ext autoreload\n# [R1] the string -- text: \"non-empty\"\nawait something()\nassert True\n"
    assert kinds(synthetic(check)) == []


def test_defect_1_an_assert_before_any_marker():
    check = "assert f()\n" + CLEAN
    assert kinds(synthetic(check)) == [UNSTATED_CHECK]
    raised = "if not f():\n    raise AssertionError\n" + CLEAN
    assert kinds(synthetic(raised)) == [UNSTATED_CHECK]


def test_defect_2_a_declared_requirement_with_no_assert():
    unchecked = '# [R3] never checked -- text: "Return a"\nprint(1)\n# END HIDDEN TESTS'
    check = CLEAN.replace("# END HIDDEN TESTS", unchecked)
    assert kinds(synthetic(check)) == [UNCHECKED]


@pytest.mark.parametrize("declaration", [
    '# [R1] f returns a non-empty string',                              # no -- text at all
    '# [R1] f returns a non-empty string -- text: return a non-empty',  # not quoted
    '# [R1] f returns a non-empty string -- text: "a list of dicts"',   # not in the text
    "# [R1] f returns a non-empty string -- text: \"the hidden answer\"",  # only in the solution region
])
def test_defect_3_a_declaration_without_a_phrase_of_the_text(declaration):
    check = CLEAN.replace('# [R1] f returns a non-empty string -- text: "return a non-empty str"', declaration)
    assert kinds(synthetic(check)) == [BAD_DECLARATION]


def test_defect_3_the_text_is_this_exercise_s_only():
    earlier = [new_markdown_cell("It must be a list of dicts."),
               new_code_cell("# [R1] x -- text: \"a list of dicts\"\nassert True",
                             metadata=_meta("ex0_checks", grade=True, solution=False))]
    check = CLEAN.replace('-- text: "return a non-empty str"', '-- text: "a list of dicts"')
    assert kinds(synthetic(check, before=earlier)) == [BAD_DECLARATION]


@pytest.mark.parametrize("old, new", [
    ("# [R1] again, in the hidden part", "# [R7]"),                   # never declared at all
    ("assert x\n# BEGIN HIDDEN TESTS", "# [R2]\nassert x\n# BEGIN HIDDEN TESTS"),  # resumed before its declaration
])
def test_defect_4_a_resumed_id_never_declared(old, new):
    assert kinds(synthetic(CLEAN.replace(old, new))) == [UNDECLARED_RESUME]


@pytest.mark.parametrize("matrix", [
    {"name": "ex1_matrix", "agent": "a.py", "points": 1},
    {"name": "ex1_matrix", "agent": "a.py", "points": 1, "stated": "every crash point is clean"},
])
def test_defect_5_a_matrix_check_that_no_markdown_states(matrix):
    assert kinds(synthetic(CLEAN, matrix=[matrix])) == [UNSTATED_MATRIX]


def test_a_failed_check_names_the_requirement_it_checks():
    """The judge's feedback says which stated requirement a failing assert belongs to, hidden ones too."""
    from crashlab.grading.judge import feedback
    from crashlab.grading.requirements import requirement_at

    source = ('# [R1] returns a list -- text: "returns a list"\n'
              "assert x == 1\n"
              "# BEGIN HIDDEN TESTS\n"
              '# [R2] drops a torn tail -- text: "drops a torn tail"\n'
              "assert y\n"
              "# [R1]\n"
              "assert z\n"
              "# END HIDDEN TESTS\n")
    assert requirement_at(source, 2) == "[R1] returns a list"
    assert requirement_at(source, 5) == "[R2] drops a torn tail"
    assert requirement_at(source, 7) == "[R1] returns a list"
    assert requirement_at("assert x\n", 1) is None
    for y, z, expected in ((False, True, "requirement [R2] drops a torn tail"),
                           (True, False, "requirement [R1] returns a list")):
        try:
            exec(compile(source, "<check>", "exec"), {"x": 1, "y": y, "z": z})
        except AssertionError as exc:
            said = feedback(exc, source)
        assert expected in said and "assert" not in said, said


def test_a_failure_in_the_set_up_above_the_first_marker_names_the_requirement_it_prepares():
    """An exception in a check cell's set-up (a world started, an agent run) has no marker above it: the feedback
    names the cell's first requirement, whose check that set-up was preparing."""
    from crashlab.grading.judge import feedback

    source = ('answer = run()\n'
              '# [R1] returns a list -- text: "returns a list"\n'
              "assert answer == []\n")
    try:
        exec(compile(source, "<check>", "exec"), {"run": lambda: {}["world"]})
    except KeyError as exc:
        said = feedback(exc, source)
    assert said == "KeyError, while preparing the check of requirement [R1] returns a list: no key 'world'", said


def test_a_placeholder_still_raising_is_said_to_be_not_answered_yet():
    """The student's NotImplementedError is the student notebook's placeholder: the feedback says the exercise is not
    answered yet, where, and which requirement's check met it; another exception of theirs is said as it was raised."""
    from crashlab.grading.judge import feedback

    source = '# [R1] a key -- text: "a key"\nassert keys()\n'
    stub, other = NotImplementedError(), ValueError("no order")
    stub.__student__, stub.__where__ = "NotImplementedError", "keys.py, line 6"
    other.__student__, other.__where__ = "ValueError: no order", "keys.py, line 9"
    for exc, expected in ((stub, "not answered yet: your code still raises NotImplementedError (keys.py, line 6), the "
                                 "placeholder's exception, in the check of requirement [R1] a key"),
                          (other, "your code raised ValueError: no order (keys.py, line 9), in the check "
                                  "of requirement [R1] a key")):
        try:
            exec(compile(source, "<check>", "exec"), {"keys": lambda exc=exc: (_ for _ in ()).throw(exc)})
        except Exception as raised:
            said = feedback(raised, source)
        assert said == expected, said
