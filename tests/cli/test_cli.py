"""Every ``crashlab`` command checks its input before doing any work: a bad value is one ``error:`` line on
stderr and a non-zero exit, never a traceback, and nothing is started or written."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from crashlab.cli import args as cli_args
from crashlab.cli import build_parser

AS_ROOT = os.geteuid() == 0
needs_permissions = pytest.mark.skipif(AS_ROOT, reason="root may write in a read-only folder")


def bad(case: str, args: list[str], *marks):
    """A bad command line; "{port}" in it becomes a port that something is listening on."""
    return pytest.param(case, args, id=case, marks=marks)


BAD_INPUTS = [
    # crash-test: the agent file
    bad("agent-missing", ["crash-test", "nosuch.py"]),
    bad("agent-is-a-folder", ["crash-test", "folder"]),
    bad("agent-is-a-notebook", ["crash-test", "nb.ipynb"]),
    bad("agent-does-not-compile", ["crash-test", "broken.py"]),
    # crash-test: numbers
    bad("resumers-0", ["crash-test", "agent.py", "--resumers", "0"]),
    bad("resumers-negative", ["crash-test", "agent.py", "--resumers", "-1"]),
    bad("resumers-hundreds", ["crash-test", "agent.py", "--resumers", "500"]),
    bad("jobs-0", ["crash-test", "agent.py", "--jobs", "0"]),
    bad("jobs-not-a-number", ["crash-test", "agent.py", "--jobs", "two"]),
    bad("jobs-a-thousand", ["crash-test", "agent.py", "--jobs", "1000"]),
    bad("soak-jobs-a-thousand", ["soak", "agent.py", "--jobs", "1000"]),
    bad("soak-orders-past-the-ids", ["soak", "agent.py", "--orders", "10000"]),
    bad("timeout-0", ["crash-test", "agent.py", "--timeout", "0"]),
    bad("timeout-negative", ["crash-test", "agent.py", "--timeout", "-5"]),
    bad("timeout-nan", ["crash-test", "agent.py", "--timeout", "nan"]),
    bad("timeout-inf", ["crash-test", "agent.py", "--timeout", "inf"]),
    bad("world-state-empty", ["world", "start", "--state", "", "--detach"]),
    bad("world-stop-state-empty", ["world", "stop", "--state", " "]),
    bad("double-negative", ["crash-test", "agent.py", "--double", "-1"]),
    bad("double-more-than-exist", ["crash-test", "agent.py", "--double", "100"]),
    bad("double-more-than-the-failure-path-has", ["crash-test", "agent.py", "--fail", "reserve_item", "--double", "18"]),
    # autograder: a key file that holds no key (openssl would take its first line as the password)
    bad("autograder-key-is-an-agent-file", ["autograder", "out.zip", "--encrypt", "agent.py"]),
    bad("autograder-key-is-a-notebook", ["autograder", "out.zip", "--encrypt", "nb.ipynb"]),
    bad("autograder-key-is-a-folder", ["autograder", "out.zip", "--encrypt", "folder"]),
    # crash-test: crash points, faults, order
    bad("points-empty", ["crash-test", "agent.py", "--points", ""]),
    bad("points-only-commas", ["crash-test", "agent.py", "--points", " , "]),
    bad("points-unknown-tool", ["crash-test", "agent.py", "--points", "before:nosuchtool"]),
    bad("points-model-0", ["crash-test", "agent.py", "--points", "after:model#0"]),
    bad("points-bad-when", ["crash-test", "agent.py", "--points", "during:charge_card"]),
    bad("points-no-when", ["crash-test", "agent.py", "--points", "charge_card"]),
    bad("points-all-in-a-list", ["crash-test", "agent.py", "--points", "all,after:charge_card"]),
    bad("points-repeated", ["crash-test", "agent.py", "--points", "after:charge_card,after:charge_card"]),
    bad("points-undo-step-without-fail", ["crash-test", "agent.py", "--points", "after:refund_charge"]),
    bad("points-off-the-failure-path", ["crash-test", "agent.py", "--fail", "reserve_item", "--points",
                                        "after:send_confirmation"]),
    bad("lost-ack-typo", ["crash-test", "agent.py", "--lost-ack", "charge"]),
    bad("lost-ack-twice", ["crash-test", "agent.py", "--lost-ack", "charge_card", "--lost-ack", "charge_card"]),
    bad("order-empty", ["crash-test", "agent.py", "--order", ""]),
    bad("order-not-an-order-id", ["crash-test", "agent.py", "--order", "8842"]),
    bad("expect-unknown", ["crash-test", "agent.py", "--expect", "perfect"]),
    bad("launcher-unknown", ["crash-test", "agent.py", "--launcher", "fork"]),
    bad("preload-missing-module", ["crash-test", "agent.py", "--preload", "nosuchmod"]),
    bad("preload-not-a-name", ["crash-test", "agent.py", "--preload", "no-such-mod"]),
    bad("preload-with-exec", ["crash-test", "agent.py", "--launcher", "exec", "--preload", "json"]),
    bad("fail-unknown-step", ["crash-test", "agent.py", "--fail", "bogus"]),
    bad("fail-wrong-reason", ["crash-test", "agent.py", "--fail", "reserve_item:card_declined"]),
    bad("key-lifetime-0", ["crash-test", "agent.py", "--key-lifetime", "0"]),
    # crash-test: where the report goes
    bad("json-missing-folder", ["crash-test", "agent.py", "--json", "nodir/matrix.json"]),
    bad("json-is-a-folder", ["crash-test", "agent.py", "--json", "folder"]),
    bad("json-is-the-agent", ["crash-test", "agent.py", "--json", "agent.py"]),
    bad("json-read-only-folder", ["crash-test", "agent.py", "--json", "readonly/matrix.json"], needs_permissions),
    # world and audit
    bad("port-too-big", ["world", "start", "--state", "st", "--port", "70000"]),
    bad("port-0", ["world", "start", "--state", "st", "--port", "0"]),
    bad("port-negative", ["world", "start", "--state", "st", "--port", "-1"]),
    bad("key-lease-0", ["world", "start", "--state", "st", "--key-lease", "0"]),
    bad("port-in-use", ["world", "start", "--state", "st", "--port", "{port}"]),
    bad("audit-order-empty", ["audit", "--order", ""]),
    # grade
    bad("grade-missing-notebook", ["grade", "nosuch.ipynb"]),
    bad("grade-notebook-is-a-folder", ["grade", "folder"]),
    bad("grade-timeout-0", ["grade", "nb.ipynb", "--timeout", "0"]),
    bad("grade-timeout-negative", ["grade", "nb.ipynb", "--timeout", "-1"]),
    bad("grade-deadline-0", ["grade", "nb.ipynb", "--deadline", "0"]),
    bad("grade-deadline-inf", ["grade", "nb.ipynb", "--deadline", "inf"]),
    bad("grade-json-missing-folder", ["grade", "nb.ipynb", "--json", "nodir/results.json"]),
    bad("grade-json-is-a-folder", ["grade", "nb.ipynb", "--json", "folder"]),
    bad("grade-json-is-the-notebook", ["grade", "nb.ipynb", "--json", "nb.ipynb"]),
    bad("grade-json-read-only-folder", ["grade", "nb.ipynb", "--json", "readonly/results.json"], needs_permissions),
    # result: 0 points, exit 2, whatever is wrong with the file
    bad("result-missing", ["result", "nosuch.json", "--test", "a"]),
    bad("result-folder", ["result", "folder", "--test", "a"]),
    bad("result-not-json", ["result", "notjson.json", "--test", "a"]),
    bad("result-a-list", ["result", "list.json", "--test", "a"]),
    bad("result-tests-not-a-list", ["result", "tests_not_list.json", "--test", "a"]),
    bad("result-test-missing", ["result", "ok.json", "--test", "b"]),
    bad("result-score-not-a-number", ["result", "score_text.json", "--test", "a"]),
    bad("result-score-nan", ["result", "score_nan.json", "--test", "a"]),
    bad("result-no-output-text", ["result", "output_list.json", "--test", "a"]),
    bad("result-no-test-name", ["result", "ok.json"]),
    # execute: every notebook is checked before the first one runs
    bad("execute-missing", ["execute", "nosuch.ipynb"]),
    bad("execute-malformed", ["execute", "junk.ipynb"]),
    bad("execute-not-a-notebook", ["execute", "agent.py"]),
    bad("execute-good-then-missing", ["execute", "nb.ipynb", "nosuch.ipynb"]),
    bad("execute-timeout-0", ["execute", "nb.ipynb", "--timeout", "0"]),
    # demo
    bad("demo-jobs-0", ["demo", "--jobs", "0"]),
    bad("demo-parallel-0", ["demo", "--parallel", "0"]),
    bad("demo-parallel-a-thousand", ["demo", "--parallel", "1000"]),
    # grade-batch and release: checked before any grading or copying
    bad("grade-batch-results-inside-the-submissions", ["grade-batch", "folder", "--results-dir", "folder/results"]),
    bad("grade-batch-results-are-the-submissions", ["grade-batch", "folder", "--results-dir", "folder"]),
    bad("grade-batch-csv-is-the-results-folder", ["grade-batch", "folder", "--results-dir", "res", "--csv", "res"]),
    bad("grade-batch-jobs-a-thousand", ["grade-batch", "folder", "--results-dir", "res", "--jobs", "1000"]),
    bad("release-answers-of-no-lesson", ["release", "out", "--answers-through", "99"]),
    bad("demo-json-missing-folder", ["demo", "--json", "nodir/demo.json"]),
    bad("demo-report-is-a-folder", ["demo"]),
    bad("demo-report-is-someone-elses", ["demo"]),
    # bench
    bad("bench-steps-1", ["bench", "--steps", "1"]),
    bad("bench-steps-0", ["bench", "--steps", "0"]),
    bad("bench-repeats-0", ["bench", "--repeats", "0"]),
    bad("bench-engines-unknown", ["bench", "--engines", "floor,nosuch"]),
    bad("bench-engines-empty", ["bench", "--engines", ""]),
    bad("bench-timeout-0", ["bench", "--timeout", "0"]),
    bad("bench-json-missing-folder", ["bench", "--json", "nodir/bench.json"]),
    bad("bench-plot-missing-folder", ["bench", "--plot", "nodir/bench.png"]),
    bad("bench-plot-not-an-image-name", ["bench", "--plot", "bench.txt"]),
    bad("bench-workdir-is-a-file", ["bench", "--workdir", "agent.py"]),
    # the command itself
    bad("no-command", []),
    bad("unknown-command", ["crashtest", "agent.py"]),
    bad("world-without-action", ["world"]),
]


def make_inputs(work: Path) -> None:
    """The files the cases name, good and bad."""
    (work / "agent.py").write_text("print('an agent that was never meant to run')\n")
    (work / "broken.py").write_text("def run(:\n")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), work / "nb.ipynb")
    (work / "junk.ipynb").write_bytes(b"\x00\x01 not a notebook")
    (work / "folder").mkdir()
    (work / "readonly").mkdir(mode=0o555)
    good = {"name": "a", "score": 1, "max_score": 1, "output": "passed"}
    results = {
        "ok.json": {"tests": [good]},
        "notjson.json": None,
        "list.json": [good],
        "tests_not_list.json": {"tests": 5},
        "score_text.json": {"tests": [{**good, "score": "x"}]},
        "score_nan.json": {"tests": [{**good, "score": float("nan")}]},
        "output_list.json": {"tests": [{**good, "output": ["passed"]}]},
    }
    for name, content in results.items():
        (work / name).write_text("{not json" if content is None else json.dumps(content))


def snapshot(*folders: Path) -> dict:
    """Every path under ``folders`` with its size and modification time."""
    seen = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            stat = path.lstat()
            seen[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return seen


def run_cli(args: list[str], work: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CRASHLAB_RUN_ID", None)
    return subprocess.run([sys.executable, "-m", "crashlab.cli", *args], cwd=work, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def folders(tmp_path):
    """The command's working folder, holding the inputs, and its TMPDIR, where worlds and matrices would go."""
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    make_inputs(work)
    yield work, tmp
    (work / "readonly").chmod(0o755)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case, args", BAD_INPUTS)
def test_a_bad_input_is_one_error_line_and_nothing_is_done(case, args, folders):
    work, tmp = folders
    if case == "demo-report-is-a-folder":
        (work / "crashlab-demo.html").mkdir()
    if case == "demo-report-is-someone-elses":  # notes of the learner's under the report's name: never replaced
        (work / "crashlab-demo.html").write_text("<html><body>my notes</body></html>\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        args = [a.replace("{port}", str(busy.getsockname()[1])) for a in args]
        before = snapshot(work, tmp)
        done = run_cli(args, work, tmp)
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 2, f"exit {done.returncode}: {done.stdout[-500:]} {done.stderr[-500:]}"
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and len(errors) == 1 and done.stderr.count("\n") == 1, done.stderr
    assert snapshot(work, tmp) == before, "something was written, made or started"
    assert not (work / "st").exists(), "a world was started"


# --- good input is still accepted ---------------------------------------------------------------------------
SUBCOMMANDS = [[], ["world"], ["world", "start"], ["world", "stop"], ["audit"], ["crash-test"], ["build"], ["grade"],
               ["result"], ["classroom"], ["execute"], ["bench"], ["demo"]]


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=lambda c: " ".join(c) or "crashlab")
def test_help_of_every_command_exits_0(command, capsys):
    from crashlab.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_help_names_the_tools_and_crash_points_it_accepts():
    done = subprocess.run([sys.executable, "-m", "crashlab.cli", "crash-test", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    text = " ".join(done.stdout.split())
    assert "model#N" in text and all(tool in text for tool in ("charge_card", "reserve_item", "send_confirmation"))
    assert all(undo in text for undo in ("--fail STEP", "refund_charge", "release_item", "send_cancellation"))


def test_fail_runs_the_failure_path_from_the_command_line(tmp_path):
    """``--fail``: the step fails for good in every row, undo steps are crash points, rows end cleanly undone; the
    double crashes of ``--double`` are pairs of that path, which a correct saga reaches."""
    from master_files import write_master_files

    write_master_files(Path(__file__).resolve().parents[2] / "solutions" / "07_compensation.ipynb", tmp_path)
    agent = tmp_path / "compensating_agent.py"  # the saga on the log, as the compensation lesson writes it
    done = subprocess.run([sys.executable, "-m", "crashlab.cli", "crash-test", str(agent), "--fail", "out_of_stock",
                           "--points", "after:refund_charge", "--double", "1", "--quiet", "--json",
                           str(tmp_path / "m.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    matrix = json.loads((tmp_path / "m.json").read_text())
    assert matrix["fail"] == "reserve_item:out_of_stock"
    assert [(row["point"], row["verdict"]) for row in matrix["rows"]][:2] == [
        ("(no crash)", "cleanly undone"), ("after:refund_charge", "cleanly undone")]
    [double] = matrix["rows"][2:]
    assert double["verdict"] == "cleanly undone" and double["reached"], double


def test_a_good_crash_test_command_line_is_read_as_given(tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text("print(1)\n")
    args = build_parser().parse_args([
        "crash-test", str(agent), "--points", " after:charge_card, before:model#2 ", "--order", "ORD-77-B",
        "--jobs", "3", "--timeout", "2.5", "--resumers", "4", "--double", "9", "--lost-ack", "charge_card",
        "--lost-ack", "send_confirmation", "--preload", "json", "--preload", "crashlab.order",
        "--json", str(tmp_path / "m.json")])
    assert args.points == ["after:charge_card", "before:model#2"]
    assert (args.order, args.jobs, args.timeout, args.resumers, args.double) == ("ORD-77-B", 3, 2.5, 4, 9)
    assert args.lost_ack == ["charge_card", "send_confirmation"] and args.preload == ["json", "crashlab.order"]
    assert build_parser().parse_args(["crash-test", str(agent), "--fail", "card_declined"]).fail == "charge_card:card_declined"
    defaults = build_parser().parse_args(["crash-test", str(agent)])
    assert (defaults.points, defaults.jobs, defaults.timeout, defaults.resumers, defaults.double) == ("all", 2, 60, 1, 0)
    assert build_parser().parse_args(["crash-test", str(agent), "--key-lifetime", "1.5"]).key_lifetime == 1.5
    assert defaults.fail is None and defaults.key_lifetime is None


def test_good_values_pass_each_check(tmp_path):
    assert cli_args.crash_points("all") == "all"
    assert cli_args.crash_points("before:send_confirmation,after:model#12") == ["before:send_confirmation",
                                                                               "after:model#12"]
    assert cli_args.port("1") == 1 and cli_args.port("65535") == 65535
    assert cli_args.positive_seconds("0.5") == 0.5 and cli_args.non_negative_int("0") == 0
    assert cli_args.output_file(str(tmp_path / "new.json")) and not (tmp_path / "new.json").exists()
    assert cli_args.output_folder(str(tmp_path / "not" / "yet"))
    assert cli_args.names_from(("a", "b"), "engine")("b, a,b") == ["b", "a"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    cli_args.check_port_free(free)


def test_a_good_results_file_is_read(tmp_path):
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"tests": [{"name": "a", "score": 2, "max_score": 2}]}))  # output is optional
    done = run_cli(["result", str(results), "--test", "a"], tmp_path, tmp_path)
    assert (done.returncode, done.stdout.splitlines()[0], done.stderr) == (0, "a: 2/2", "")


def test_sigterm_stops_a_crash_test_as_ctrl_c_does_and_leaves_nothing_behind(tmp_path):
    """A CI runner cancels a job with SIGTERM: the command must clean up (worlds, agents, scratch folders), and
    promptly -- a row under way has its agent killed rather than running on to its timeout. That timeout is an
    hour, so a row that ran on would end long after the test's bound on the command's exit."""
    import signal
    import time

    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    agent = Path(__file__).parents[1] / "agents" / "hang_agent.py"
    env = {**os.environ, "TMPDIR": str(private_tmp)}
    run = subprocess.Popen([sys.executable, "-m", "crashlab.cli", "crash-test", str(agent), "--points",
                            "after:charge_card", "--timeout", "3600", "--launcher", "exec"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(private_tmp.iterdir()):
        time.sleep(0.1)  # the matrix has made its scratch folder: the run is under way
    time.sleep(2)
    run.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    try:
        _, err = run.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        raise AssertionError("crash-test did not stop on SIGTERM: the row under way ran on instead of being stopped")
    print(f"crash-test stopped {time.monotonic() - signalled:.1f} s after SIGTERM")
    assert run.returncode == 130, err[-800:]
    assert "Traceback" not in err, err[-800:]
    assert list(private_tmp.iterdir()) == [], f"left behind: {list(private_tmp.iterdir())}"


@pytest.mark.parametrize("module", ["crashlab.world.server", "crashlab.engines.temporal.server"])
def test_a_server_modules_port_out_of_range_is_one_line_not_a_traceback(module, tmp_path):
    done = subprocess.run([sys.executable, "-m", module, "--state", str(tmp_path / "s"), "--port", "70000"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "a port is between 1 and 65535 (0: any free one), got '70000'" in done.stderr, done.stderr
    assert not (tmp_path / "s").exists()
