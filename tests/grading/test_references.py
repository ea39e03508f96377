"""Grading an exercise on the master's answers to the exercises it builds on (crashlab.grading.references)."""

import os

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from crashlab.grading import references
from crashlab.grading.references import copy_on_answers, master_answers, on_reference_answers


def test_the_masters_answer_is_its_writefile_cell_without_the_solution_markers():
    cell = new_code_cell("%%writefile steps.py\ndef key():\n    # BEGIN SOLUTION\n    return 'k'\n    # END SOLUTION\n",
                         metadata={"nbgrader": {"grade_id": "ex1_steps", "solution": True}})
    master = new_notebook(cells=[cell])
    assert master_answers(master, ["ex1_steps"]) == {"ex1_steps": ("steps.py", "def key():\n    return 'k'\n")}
    with pytest.raises(ValueError, match="no %%writefile answer cell 'ex9'"):
        master_answers(master, ["ex9"])


def test_the_copy_uses_the_answers_and_follows_no_symlink(tmp_path):
    (tmp_path / "agent.py").write_text("import steps\n")
    (tmp_path / "steps.py").write_text("WRONG = True\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for students")
    os.symlink(secret, tmp_path / "planted.py")
    agent = copy_on_answers(tmp_path / "agent.py", {"ex1_steps": ("steps.py", "RIGHT = True\n")})
    folder = agent.parent
    assert folder.parent == tmp_path and folder.name.startswith(".on-reference-agent-")
    assert agent.read_text() == "import steps\n"
    assert (folder / "steps.py").read_text() == "RIGHT = True\n"
    assert not (folder / "planted.py").exists()
    assert (tmp_path / "steps.py").read_text() == "WRONG = True\n"  # the student's own file is left alone
    assert copy_on_answers(tmp_path / "agent.py", {}).parent != folder  # a fresh folder every time


def test_outside_grading_the_agent_runs_as_it_is_and_while_grading_on_the_answers(monkeypatch, tmp_path):
    (tmp_path / "agent.py").write_text("import steps\n")
    monkeypatch.setattr(references, "REFERENCES", {})
    assert on_reference_answers(tmp_path / "agent.py") == tmp_path / "agent.py"
    monkeypatch.setattr(references, "REFERENCES", {"ex1_steps": ("steps.py", "RIGHT = True\n")})
    with pytest.raises(RuntimeError, match="reference workspace"):  # never beside the student's own code
        on_reference_answers(tmp_path / "agent.py")
    with references.reference_workspace(tmp_path, chdir=True) as workspace:  # as the judge runs such a check
        copied = on_reference_answers("agent.py")
        assert copied.parent.parent == workspace and (copied.parent / "steps.py").read_text() == "RIGHT = True\n"
        assert (workspace / "agent.py").read_text() == "import steps\n"
    assert not workspace.exists() and not [p for p in tmp_path.iterdir() if p.name != "agent.py"]
