"""A syntax error in an answer file is named as one: the file, the exercise, the line and the parser's words.

An answer file that does not parse fails every check that runs it, and each check says so in its own terms: an
agent that exited with code 1, a worker gone before its workflow reached a state, a crash matrix whose runs on the
reference answers keep their output to themselves. None of them says what to fix. The grader parses each
``%%writefile`` answer itself -- parsing runs none of the student's code -- and puts the one fact that explains
those failures first in the feedback of every failed check of that exercise, and of a later exercise's failed check
whose own words name the file or a SyntaxError (a later exercise's agent may import the earlier files, or may run
on the reference answers instead). A passing check is left as it is. Answers that are cells rather than
files are named by :mod:`crashlab.grading.answer_cells`.
"""

from __future__ import annotations

from dataclasses import dataclass

from crashlab.course.notebooks import exercise_of, grade_id, is_answer_cell
from crashlab.plumbing.tracebacks import cut_at_word


@dataclass(frozen=True)
class SyntaxProblem:
    exercise: int
    file: str
    line: int | None
    message: str

    def words(self) -> str:
        where = f", line {self.line}" if self.line else ""
        return (f"a syntax error in `{self.file}` (exercise {self.exercise}'s cell){where}: {self.message}. "
                "Nothing in that file could run; fix it first")


def answer_file_syntax_errors(nb) -> list[SyntaxProblem]:
    """Every answer cell of ``nb`` that writes a Python file which does not parse."""
    problems = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_answer_cell(cell):
            continue
        first, _, body = cell.source.partition("\n")
        parts = first.split()
        exercise = exercise_of(grade_id(cell))
        if not parts or parts[0] != "%%writefile" or not parts[-1].endswith(".py") or exercise is None:
            continue
        try:
            compile(body, parts[-1], "exec", dont_inherit=True)
        except SyntaxError as error:  # IndentationError and TabError too
            message = cut_at_word(str(error.msg or "invalid syntax"), 200)
            problems.append(SyntaxProblem(exercise, parts[-1], error.lineno, message))
        except (ValueError, RecursionError, MemoryError, OverflowError):
            continue  # null bytes, or too deep to parse: the checks' own words say what happened
    return problems


def name_syntax_errors(tests, problems: list[SyntaxProblem]) -> None:
    """Put first in a failed check's feedback the syntax errors of its own exercise, and those of earlier exercises
    that its words show it met."""
    if not problems:
        return
    for test in tests:
        exercise = exercise_of(test.name)
        if test.score >= test.max_score or exercise is None:
            continue
        causes = [p.words() for p in problems if p.exercise == exercise
                  or (p.exercise < exercise and ("SyntaxError" in test.output or p.file in test.output))]
        if causes:
            test.output = "\n".join(causes) + "\nWhat the check saw: " + test.output


__all__ = ["SyntaxProblem", "answer_file_syntax_errors", "name_syntax_errors"]
