"""What the whole suite shares: the scheduler that keeps a notebook's cells on one worker, the check of every
feedback message the suite's gradings produce (:mod:`feedback_guard`), the check that no master's cell waits long
in silence (:mod:`silent_waits`), a clean environment for every test, the fixtures many modules use -- ``world`` (a
fresh world), ``world_env`` (its endpoints in this process's environment), ``no_world_env``, ``launcher`` (a warm
launcher per module, with the module's ``PRELOAD``) and ``lesson_files`` (a master's files in a scratch folder) --
and the ``needs_restate`` marker (such a test skips, saying how to install the server, where `make setup` could not).
nbval runs each master without its hidden checks, as the learner's notebook has it (:mod:`nbval_as_learners`).

One pool of workers (the Makefile's ``-n``) for the whole suite: the tests and nbval over the masters. Run as
two phases, each ended with one worker idle while the other finished its longest item, and paid for its own
start-up; in one pool the workers stay busy to the end. nbval runs a notebook's cells in one kernel, in order,
so all the cells of a notebook must go to one worker; every other test may go anywhere. xdist's ``loadscope``
groups by module, which would put all of ``test_grading_all``'s gradings on one worker; this scheduler groups
by notebook, and by module only where a module's tests share fixtures set up once (a server, a warm launcher: a
worker tears them down whenever its next test is another module's, so spread over the queue they would start again
for each test), and starts the longest units first (:mod:`durations`).
"""

import os

import pytest
from xdist.scheduler import LoadScopeScheduling

import durations
import feedback_guard
import nbval_as_learners
import nbval_kernels
import silent_waits

feedback_guard.install()  # before any test module imports the grader's functions


class NotebookScopeScheduling(LoadScopeScheduling):
    """A notebook's cells are one unit of work, and so are the tests of a module that share fixtures set up once;
    every other test function is a unit of its own.

    Units are queued longest first, by the seconds each took when last measured (:mod:`durations`): the
    notebooks and the long gradings start at once and the short tests fill the end, so no worker is still
    running a minute-long unit after the others have run out of work."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return durations.unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the queue is complete by the first assignment; order it once
            figures = durations.load()
            queue = sorted(self.workqueue.items(), key=lambda item: -durations.expected(item[0], figures))
            self.workqueue.clear()
            self.workqueue.update(queue)
            self._ordered = True
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config, log):
    return NotebookScopeScheduling(config, log)


def pytest_configure(config):
    nbval_kernels.install()  # a master's kernel that dies while starting says how; one that lost a port starts again
    silent_waits.register(config)  # nbval's cells of the masters, wherever they run: a long silence fails its cell
    config.addinivalue_line("markers", "needs_restate: needs the Restate server binary (`make setup` installs it); "
                                       "skips, saying so, without it")


def pytest_collection_modifyitems(config, items):
    nbval_as_learners.strip_hidden_checks(items)  # nbval runs a master as the learner's notebook: see that module


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_restate"):
        from restate_or_skip import restate_or_skip

        restate_or_skip()


@pytest.fixture(autouse=True)
def feedback_names_the_mistake():
    """Every feedback message a test's gradings produced, checked after the test (see :mod:`feedback_guard`)."""
    feedback_guard.take_produced()
    yield
    bad = [(output, problems) for output in feedback_guard.take_produced()
           if (problems := feedback_guard.feedback_problems(output))]
    if bad:
        pytest.fail("feedback a learner would be misled by:\n" + "\n".join(
            f"- {'; '.join(problems)}\n  in: {output[:1500]}" for output, problems in bad), pytrace=False)


@pytest.fixture
def lesson_files(tmp_path, request):
    """The files a lesson's master writes, in a scratch folder: ``(folder, notebook)``. The master is the test
    module's ``MASTER``."""
    from master_files import write_master_files

    return tmp_path, write_master_files(request.module.MASTER, tmp_path)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """Every test runs without the opt-in real model (a developer's shell may have it on: no test may spend a key),
    and leaves this process's environment as it found it: code under test that sets variables for the whole
    process (a lesson's ``fresh_world``, a server's environment) cannot leak them into the next test."""
    saved = dict(os.environ)
    monkeypatch.delenv("CRASHLAB_REAL_MODEL", raising=False)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def world(tmp_path):
    """A fresh world in the test's own folder, no crash point armed; stopped after the test."""
    from crashlab.world import World

    with World.start(tmp_path / "world") as world:
        yield world


@pytest.fixture
def world_env(world, monkeypatch):
    """``world``, with its endpoints in this process's environment: for a test that calls the agent's clients itself."""
    for name, value in world.env().items():
        if name.startswith("CRASHLAB_"):
            monkeypatch.setenv(name, value)
    return world


@pytest.fixture
def no_world_env(monkeypatch):
    """No world's endpoints in this process's environment: what an agent started outside any world sees."""
    from crashlab.envnames import ENV_MODEL_URL, ENV_SERVICES_URL, ENV_STATE_DIR

    for name in (ENV_MODEL_URL, ENV_SERVICES_URL, ENV_STATE_DIR):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def launcher(request):
    """A warm launcher for the module's tests, with what the module's ``PRELOAD`` names imported (its lesson's
    engine, say); closed after them."""
    from crashlab.harness.launcher import WarmLauncher

    with WarmLauncher(getattr(request.module, "PRELOAD", ())) as warm:
        yield warm
