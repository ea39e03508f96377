"""The private grading bundle, for real: `crashlab autograder` writes a zip; laid out as Gradescope lays it out
(``source/`` unpacked from the zip, ``submission/``, ``results/``; the root moved by CRASHLAB_AUTOGRADER_DIR),
its ``setup.sh`` installs the grader and its ``run_autograder`` grades lesson 1's master to full marks and the
student notebook to 0, isolated. The release's classroom script fetches the same bundle from either secret."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from crashlab.release.bundle import build_autograder, encrypt, masters_for
from crashlab.release.files import TEMPLATES
from crashlab.plumbing.scratch import remove_scratch

ROOT = Path(__file__).resolve().parents[2]
LESSON1 = "01_naive_event_log.ipynb"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert [m.name for m in build_autograder(out, ["01"])] == [LESSON1]
    return out


def gradescope_root(source: Path | None, bundle: Path, submitted: Path) -> Path:
    """A folder laid out as Gradescope's /autograder: the bundle unpacked in source/ (or ``source`` linked
    there), run_autograder copied beside it, the submission -- a repository's layout -- in submission/."""
    root = Path(tempfile.mkdtemp(prefix="crashlab-autograder-"))
    os.chmod(root, 0o755)  # as /autograder: the sandbox users run the Python installed in it
    if source is None:
        subprocess.run(["unzip", "-q", str(bundle), "-d", str(root / "source")], check=True)
    else:
        (root / "source").symlink_to(source)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission" / "course").mkdir(parents=True)
    shutil.copyfile(submitted, root / "submission" / "course" / LESSON1)
    return root


def test_gradescope_setup_then_run_autograder_grades_a_master_full_and_a_stub_zero(bundle):
    first = gradescope_root(None, bundle, ROOT / "solutions" / LESSON1)
    second = gradescope_root(first / "source", bundle, ROOT / "course" / LESSON1)
    try:
        started = time.monotonic()
        setup = subprocess.run(["bash", "./setup.sh"], cwd=first / "source", capture_output=True, text=True,
                               timeout=600)
        assert setup.returncode == 0, setup.stdout + setup.stderr
        print(f"setup.sh: {time.monotonic() - started:.1f} s")
        assert (first / "source" / "solutions").stat().st_mode & 0o077 == 0, "the masters are root's alone"
        servers = list((first / "source" / ".venv" / "restate").glob("node_modules/@restatedev/*/bin/restate-server"))
        assert servers, "setup.sh installs the Restate server without npm:\n" + setup.stdout + setup.stderr

        runs = [subprocess.Popen([str(root / "run_autograder")], cwd=root, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "CRASHLAB_AUTOGRADER_DIR": str(root)})
                for root in (first, second)]  # two submissions at once, as two Gradescope containers would
        outputs = [run.communicate(timeout=600)[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outputs
        print(*outputs, sep="\n")
        master, stub = (json.loads((root / "results" / "results.json").read_text()) for root in (first, second))
    finally:
        remove_scratch(second)
        remove_scratch(first)

    for results in (master, stub):
        assert {"score", "execution_time", "output", "tests"} <= set(results)
        assert all(set(t) == {"name", "score", "max_score", "visibility", "output"} for t in results["tests"])
        assert all(t["name"].startswith("01_naive_event_log ") for t in results["tests"])
        assert sum(t["max_score"] for t in results["tests"]) == 12
        assert "isolated" not in results["output"], "the students' summary says nothing of the grader's machinery"
    assert all(f"{LESSON1}: isolated (student code ran as a sandbox user)" in said for said in outputs), outputs
    assert master["score"] == 12, json.dumps(master, indent=1)
    assert stub["score"] == 0, json.dumps(stub, indent=1)
    matrix = next(t for t in stub["tests"] if t["name"].endswith("ex3_crash_matrix"))
    assert "NotImplementedError" in matrix["output"] and "never reached" in matrix["output"], matrix["output"]
    assert any(t["name"].endswith("ex3_crash_matrix") and t["score"] == t["max_score"] > 0 for t in master["tests"])


def test_a_missing_or_broken_notebook_still_writes_results(tmp_path):
    from crashlab.grading.gradescope import grade_submission

    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / LESSON1).write_text("{not json")
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    shutil.copyfile(ROOT / "solutions" / LESSON1, solutions / LESSON1)
    for folder, why in (("empty", "not submitted"), ("broken", "is not a Jupyter notebook")):
        results = grade_submission(tmp_path / folder, solutions)
        assert results["score"] == 0 and sum(t["max_score"] for t in results["tests"]) == 12
        assert all(why in t["output"] for t in results["tests"]), results


def test_the_bundle_holds_the_grader_and_only_the_masters_it_needs(bundle):
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        manifest = json.loads(archive.read("grading.json"))
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert manifest == {"notebooks": [LESSON1]}
    assert [n for n in names if n.startswith("solutions/")] == [f"solutions/{LESSON1}"]
    assert {"pyproject.toml", "constraints.txt", "shared/crashlab/grading/grade.py",
            "shared/crashlab/answers/lesson01.py"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".egg-info" in n]
    with zipfile.ZipFile(bundle) as archive:  # the grader reads no widget state: the bundle need not carry it
        assert "widgets" not in json.loads(archive.read(f"solutions/{LESSON1}"))["metadata"]
    assert bundle.stat().st_mode & 0o077 == 0
    graded, carried = masters_for(["11"], ROOT / "solutions")  # lesson 11 runs lessons 1 and 2's agents
    assert [m.name[:2] for m in graded] == ["11"] and [m.name[:2] for m in carried] == ["01", "02", "11"]


def fetch(into: Path, **secrets) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHLAB_")}
    return subprocess.run(["bash", str(TEMPLATES / "grade.sh"), "fetch", str(into)], capture_output=True, text=True,
                          env={**env, **secrets}, timeout=120)


def test_the_classroom_script_fetches_the_bundle_from_either_secret(bundle, tmp_path):
    key = tmp_path / "bundle.key"
    encrypted = encrypt(bundle, key)
    assert key.stat().st_mode & 0o077 == 0 and zipfile.is_zipfile(bundle) and not zipfile.is_zipfile(encrypted)
    secret = key.read_text().strip()

    done = fetch(tmp_path / "a", CRASHLAB_BUNDLE_URL=encrypted.as_uri(), CRASHLAB_BUNDLE_KEY=secret)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a" / "setup.sh").is_file() and (tmp_path / "a" / "solutions" / LESSON1).is_file()

    done = fetch(tmp_path / "b", CRASHLAB_BUNDLE_URL=encrypted.as_uri(), CRASHLAB_BUNDLE_KEY="not-the-key")
    assert done.returncode == 1 and "could not decrypt" in done.stderr

    repository = tmp_path / "grader-repo"  # a private repository holding the unzipped bundle
    shutil.copytree(tmp_path / "a", repository)
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"]):
        subprocess.run(["git", *command], cwd=repository, check=True)
    done = fetch(tmp_path / "c", CRASHLAB_GRADER_REPO=str(repository), CRASHLAB_GRADER_TOKEN="t0ken")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c" / "setup.sh").is_file() and not (tmp_path / "c" / ".git").exists()

    done = fetch(tmp_path / "d")
    assert done.returncode == 1 and "CRASHLAB_BUNDLE_URL" in done.stderr and not (tmp_path / "d").exists()


def test_setup_leaves_nothing_behind_when_python_cannot_be_downloaded(tmp_path):
    """No Python 3.11.5 or later at hand, and the download of one fails (its mirror refuses): setup.sh stops with
    one error line and takes the uv it fetched for the download away with it."""
    source = tmp_path / "source"
    (source / "shared" / "crashlab" / "engines" / "restate").mkdir(parents=True)
    shutil.copyfile(ROOT / "shared" / "crashlab" / "engines" / "restate" / "SERVER_VERSION",
                    source / "shared" / "crashlab" / "engines" / "restate" / "SERVER_VERSION")
    shutil.copyfile(TEMPLATES / "setup.sh", source / "setup.sh")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "python3").symlink_to(sys.executable)  # a python3 with pip, to install uv with
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}", "CRASHLAB_PYTHON": "/bin/false",
           "UV_PYTHON_INSTALL_MIRROR": "http://127.0.0.1:9/refused", "UV_OFFLINE": "1"}
    done = subprocess.run(["bash", "setup.sh"], cwd=source, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: /bin/false is missing or older than 3.11.5" in done.stderr, done.stderr
    assert not (source / ".uv-bootstrap").exists(), "the uv fetched for the download was left behind"
    assert not (source / ".venv").exists()
