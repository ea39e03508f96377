"""Lesson 2: the reference agent is clean everywhere, and the known-wrong answers lose points."""

from pathlib import Path

import nbformat
import pytest

from crashlab.grading.grade import grade_notebook, score_matrix_check
from crashlab.course.notebooks import grade_id
from master_files import write_master_files
from crashlab.harness import crash_test, double_crash_pairs
from crashlab.crash_points import allowed_repeats

ROOT = Path(__file__).resolve().parents[1]
MASTER = ROOT / "solutions" / "02_idempotent_tools.ipynb"


@pytest.fixture
def lesson_files(tmp_path):
    return tmp_path, write_master_files(MASTER, tmp_path)


def test_reference_agent_is_clean_everywhere(lesson_files):
    """Every crash point with 2 resumers racing, and sampled double crashes with lost replies. (The
    master's own grading runs the single-resumer matrix and the 4-resumer rows: see test_grading_all.)"""
    folder, _ = lesson_files
    agent = folder / "keyed_agent.py"
    for kwargs in ({"resumers": 2},
                   {"points": [], "double": double_crash_pairs(6), "faults": [("lost_ack:charge_card", 1, None)]}):
        points = kwargs.pop("points", "all")
        matrix = crash_test(agent, points, expect="durable", progress=False, workdir=folder / "rows", **kwargs)
        assert matrix.ok, str(matrix)
        assert all(row.duplicates == 0 and row.finished for row in matrix.rows)
        for row in matrix.rows:
            allowed = allowed_repeats(row.point)
            assert row.repeated_model_calls <= allowed, row.point


def test_uuid4_key_scores_less_than_full(lesson_files):
    folder, nb = lesson_files
    (folder / "keys.py").write_text("import uuid\n\ndef idempotency_key(order_id, step, tool):\n"
                                    "    return str(uuid.uuid4())\n")
    check = nb.metadata["crashlab"]["matrix_checks"][0]
    result = score_matrix_check(check, folder)
    assert result.score < result.max_score
    assert "after:charge_card: 2 charges (1 duplicate)" in result.output, result.output


def test_read_check_write_json_ledger_scores_less_than_full(tmp_path):
    """The JSON ledger as the answer to exercise 3: the hidden race check catches it."""
    nb = nbformat.read(MASTER, as_version=4)
    cell = next(c for c in nb.cells if grade_id(c) == "ex3_ledger")
    cell.source = '''%%writefile tool_ledger.py
import json
from pathlib import Path


class LedgerCorruptError(RuntimeError):
    pass


class SqliteLedger:
    """Named as asked, but really a read-check-write JSON file."""

    def __init__(self, path, wait=10.0):
        self.path = Path(str(path) + ".json")

    def _read(self):
        return json.loads(self.path.read_text()) if self.path.exists() and self.path.read_text() else {}

    def recorded(self, key):
        return self._read().get(key)

    def claim(self, key):
        data = self._read()
        if key in data:
            return False
        data[key] = None
        self.path.write_text(json.dumps(data))
        return True

    def run_once(self, key, effect):
        data = self._read()
        if data.get(key) is not None:
            return data[key]
        result = effect()
        data[key] = result
        self.path.write_text(json.dumps(data))
        return result
'''
    path = tmp_path / MASTER.name
    nbformat.write(nb, path)
    report = grade_notebook(path)
    scores = {t.name: t.score for t in report.tests}
    assert report.score < report.max_score
    assert scores["ex3_ledger_checks"] == 0, str(report)
    assert scores["ex1_keys_checks"] == 3 and scores["ex1_crash_matrix"] == 4, "other exercises keep their points: " + str(report)
