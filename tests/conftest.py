"""What the whole suite shares: the scheduler that keeps a notebook's cells on one worker, the check of every
feedback message the suite's gradings produce (:mod:`feedback_guard`), the check that no master's cell waits long
in silence (:mod:`silent_waits`), the ``lesson_files`` fixture (a master's
files in a scratch folder), and the ``needs_restate`` marker (such a test skips, saying how
to install the server, where `make setup` could not).

One pool of two workers for the whole suite: the tests and nbval over the masters.

Run as two phases, each ended with one worker idle while the other finished its longest item, and paid
for its own start-up. Run in one pool, the two workers stay busy to the end. nbval runs a notebook's
cells in one kernel, in order, so all the cells of a notebook must go to one worker; every other test
may go anywhere. xdist's ``loadscope`` groups by module, which would put all of ``test_grading_all``'s
gradings on one worker; this scheduler groups by notebook only.
"""

import pytest
from xdist.scheduler import LoadScopeScheduling

import feedback_guard
import nbval_kernels
import silent_waits

feedback_guard.install()  # before any test module imports the grader's functions


class NotebookScopeScheduling(LoadScopeScheduling):
    """A notebook's cells are one unit of work; every test function is a unit of its own.

    Scopes are queued largest first (xdist's ``loadscopereorder``): the notebooks, the longest items,
    start at once and the short tests fill the end."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if path.endswith(".ipynb") else nodeid


def pytest_xdist_make_scheduler(config, log):
    return NotebookScopeScheduling(config, log)


def pytest_configure(config):
    nbval_kernels.install()  # a master's kernel that dies while starting says how; one that lost a port starts again
    silent_waits.register(config)  # nbval's cells of the masters, wherever they run: a long silence fails its cell
    config.addinivalue_line("markers", "needs_restate: needs the Restate server binary (`make setup` installs it); "
                                       "skips, saying so, without it")


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
