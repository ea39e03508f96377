"""A syntax error in an answer file is named in the feedback of the checks it fails: file, exercise, line."""

import nbformat

import tiny_course
from crashlab.grading import grade_notebook
from crashlab.grading.report import TestResult as Result
from crashlab.grading.syntax import answer_file_syntax_errors, name_syntax_errors


def test_the_parser_s_words_file_and_line_for_each_answer_file_that_does_not_parse():
    nb = tiny_course.master()
    nb.cells[1].source = "%%writefile tiny.py\ndef double(x):\n    return (2 * x\n"
    [problem] = answer_file_syntax_errors(nb)
    assert (problem.exercise, problem.file, problem.line) == (1, "tiny.py", 2), problem
    assert "was never closed" in problem.message, problem


def test_only_failed_checks_of_that_exercise_and_later_ones_that_met_the_file_are_told():
    nb = tiny_course.master()
    nb.cells[3].source = "%%writefile halves.py\ndef half(x)\n    return x / 2\n"
    tests = [Result("ex1_double_checks", 0, 2, "check failed", "cell"),
             Result("ex2_half_checks", 0, 3, "the agent failed", "cell"),
             Result("ex3_crash_matrix", 0, 2, "not clean: exit code 1: SyntaxError (halves.py, line 1)", "matrix"),
             Result("ex3_own_checks", 0, 2, "expected 7 tasks, got 4", "cell"),
             Result("ex3_other_checks", 2, 2, "passed", "cell")]
    name_syntax_errors(tests, answer_file_syntax_errors(nb))
    untold = [tests[0], tests[3], tests[4]]  # another exercise's; a later one's that never met the file; a pass
    assert [t.output for t in untold] == ["check failed", "expected 7 tasks, got 4", "passed"]
    for test, saw in ((tests[1], "the agent failed"), (tests[2], "not clean: exit code 1: SyntaxError (halves.py, line 1)")):
        assert test.output.startswith("a syntax error in `halves.py` (exercise 2's cell), line 1: expected ':'"), \
            test.output
        assert test.output.endswith("What the check saw: " + saw), test.output


def test_a_graded_notebook_with_a_syntax_error_says_where_and_costs_only_its_exercise(tmp_path):
    solutions = tiny_course.write_course(tmp_path / "course")
    nb = tiny_course.master()
    nb.cells[1].source = "%%writefile tiny.py\ndef double(x):\n    return 2 * x)\n"
    path = tmp_path / "me" / tiny_course.NAME
    path.parent.mkdir()
    nbformat.write(nb, path)
    report = grade_notebook(path, solutions=solutions, isolate=False)
    scores = {t.name: (t.score, t.output) for t in report.tests}
    assert scores["ex2_half_checks"][0] == 3, scores
    assert scores["ex1_double_checks"][0] == 0, scores
    assert "a syntax error in `tiny.py` (exercise 1's cell), line 2: unmatched ')'" in scores["ex1_double_checks"][1]
