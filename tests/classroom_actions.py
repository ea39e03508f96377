"""GitHub Classroom's two actions, as their published source runs them, for the tests of the workflow we generate.

Read from the actions' ``v1`` tags (the versions the workflow names):

- ``classroom-resources/autograding-command-grader@v1`` (tag v1 = d5b3fa6f, ``src/main.js``, bundled the same in
  ``dist/main.js``): ``execSync(command, {timeout, env, stdio: 'inherit'})`` with ``env = {PATH: process.env.PATH,
  FORCE_COLOR: 'true', DOTNET_CLI_HOME: '/tmp', DOTNET_NOLOGO: 'true', HOME: process.env.HOME}`` -- nothing else of
  the runner's or the step's environment reaches the command. Exit 0 is ``status: 'pass'`` and ``score:
  max-score``; any other exit ``'fail'`` and 0. It sets the output ``result`` to the base64 of
  ``{version: 1, status, max_score, tests: [{name, status, score, message, test_code, filename, line_no,
  duration}]}``.
- ``classroom-resources/autograding-grading-reporter@v1`` (tag v1 = d13b5912, ``src/main.js``): for each of the
  comma-separated ``runners``, ``process.env[`${runner.trim().toUpperCase()}_RESULTS`]``, base64-decoded and parsed
  as JSON -- a name it does not find is ``undefined``, ``Buffer.from(undefined)`` throws, and the run fails with no
  score. In its ``catch``, a ``runners`` input that does not match ``/^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$/`` is reported
  as "The runners input must be a comma-separated list of strings." instead of the error itself. Its
  ``src/notify-classroom.js`` adds up ``max_score`` of each runner and ``score`` of each test, and writes the notice
  ``Points TOTAL/MAX`` (title "Autograding complete") that Classroom records.

Only these lookups are copied here, in Python; the actions' code is not. An end-to-end run with their JavaScript
is an instructor's trial, not a test (it needs the actions fetched from GitHub).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
RUNNERS_PATTERN = re.compile(r"^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$")  # the reporter's, in its catch
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def steps(workflow: str) -> list[dict]:
    """The workflow's one job's steps, as Actions reads the YAML."""
    [job] = yaml.safe_load(workflow)["jobs"].values()
    return job["steps"]


def graders(workflow: str) -> list[dict]:
    return [s for s in steps(workflow) if s.get("uses") == COMMAND_GRADER]


def reporter(workflow: str) -> dict:
    [step] = [s for s in steps(workflow) if s.get("uses") == REPORTER]
    return step


def evaluate(text: str, context: dict[str, str]) -> str:
    """``${{ github.run_id }}`` and ``${{steps.ID.outputs.result}}`` as Actions fills them in (an unknown name is the
    empty string, as in Actions)."""
    return EXPRESSION.sub(lambda found: str(context.get(found.group(1), "")), str(text))


def runner_env_name(runner: str) -> str:
    """The reporter's lookup: ``${runner.trim().toUpperCase()}_RESULTS``."""
    return f"{runner.strip().upper()}_RESULTS"


@dataclass
class StepResult:
    exit_code: int
    output: str     # what the command printed
    result: str     # the step's output ``result``: base64 JSON


def run_command_grader(step: dict, workspace: Path, context: dict[str, str], path: str, home: str) -> StepResult:
    """One command-grader step: its command, through ``/bin/sh -c`` as ``execSync`` runs it, in the workspace, with
    only the variables the action passes; its ``result`` output as the action makes it."""
    inputs = {name: evaluate(value, context) for name, value in step["with"].items()}
    env = {"PATH": path, "FORCE_COLOR": "true", "DOTNET_CLI_HOME": "/tmp", "DOTNET_NOLOGO": "true", "HOME": home}
    done = subprocess.run(["/bin/sh", "-c", inputs["command"]], cwd=workspace, env=env, capture_output=True,
                          text=True, timeout=float(inputs.get("timeout", 10)) * 60)
    status, max_score = ("pass" if done.returncode == 0 else "fail"), int(inputs.get("max-score") or 0)
    result = {"version": 1, "status": status, "max_score": max_score,
              "tests": [{"name": inputs["test-name"], "status": status, "score": max_score if status == "pass" else 0,
                         "message": "" if status == "pass" else "failed with exit code 1",
                         "test_code": inputs["command"], "filename": "", "line_no": 0, "duration": 0}]}
    return StepResult(done.returncode, done.stdout + done.stderr,
                      base64.b64encode(json.dumps(result).encode()).decode())


def report(workflow: str, context: dict[str, str]) -> tuple[int, int]:
    """What the reporter records (``Points TOTAL/MAX``) from the step outputs in ``context``; LookupError where the
    reporter would throw and record nothing."""
    step = reporter(workflow)
    env = {name: evaluate(value, context) for name, value in (step.get("env") or {}).items()}
    total = maximum = 0
    for runner in str(step["with"]["runners"]).split(","):
        encoded = env.get(runner_env_name(runner))
        if not encoded:
            raise LookupError(f"the reporter finds no {runner_env_name(runner)} for runner {runner!r}: the run fails "
                              "and Classroom records no score")
        results = json.loads(base64.b64decode(encoded))
        if results.get("max_score"):
            maximum += results["max_score"]
            total += sum(test["score"] for test in results["tests"])
    return total, maximum
