"""One pool of two workers for the whole suite: the tests and nbval over the masters.

Run as two phases, each ended with one worker idle while the other finished its longest item, and paid
for its own start-up. Run in one pool, the two workers stay busy to the end. nbval runs a notebook's
cells in one kernel, in order, so all the cells of a notebook must go to one worker; every other test
may go anywhere. xdist's ``loadscope`` groups by module, which would put all of ``test_grading_all``'s
gradings on one worker; this scheduler groups by notebook only.
"""

from xdist.scheduler import LoadScopeScheduling


class NotebookScopeScheduling(LoadScopeScheduling):
    """A notebook's cells are one unit of work; every test function is a unit of its own.

    Scopes are queued largest first (xdist's ``loadscopereorder``): the notebooks, the longest items,
    start at once and the short tests fill the end."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if path.endswith(".ipynb") else nodeid


def pytest_xdist_make_scheduler(config, log):
    return NotebookScopeScheduling(config, log)
