"""The crash harness: kill an agent at a named point, resume it in a new process, audit the world.

For each crash point the harness starts a fresh world, arms the crash point *in the world*, runs
``python AGENT.py --order ID`` (which is told nothing), and lets the world kill the whole run -- every process it
started, whatever session it moved to -- when one of the run's processes makes the request for that point for the
order under test (:mod:`crashlab.world.runscope` says how a run is told apart from outside). It then runs the same command again as a brand-new
process and audits the world's ledgers. Whether a point was reached is what the world saw, once the run's
first process died of it; a crash point that was never reached is a failure, not a pass.

Whatever an agent does, a row ends: every kill takes the agent's process group and everything it
started (:mod:`crashlab.plumbing.processes`), no wait is without a timeout, and every scratch folder the
harness made is removed when its run ends, also on an error or Ctrl-C (:mod:`crashlab.plumbing.scratch`).
On Ctrl-C (or SIGTERM, in the CLI) the rows under way do not run on to their timeout: their agent
processes are killed at once, and no row starts another (:class:`crashlab.harness.runs.CrashTestAgents`).

The failure path (``fail="reserve_item"``, say): every row's world is told first that the step fails for good
for the order, and a correct agent undoes what it did -- the points are those of the do steps up to the failure
and of the undo steps (:func:`crashlab.order.failure_points`), and the expected end is ``cleanly undone``.

The package, by concern: :mod:`~crashlab.harness.runs` (agent processes, Ctrl-C), :mod:`~crashlab.harness.verdicts`
(what a correct agent shows, the judge), :mod:`~crashlab.harness.matrix` (rows and the crash matrix).
"""

from crashlab.crash_points import BASELINE, double_crash_pairs
from crashlab.harness.options import MatrixOptions
from crashlab.harness.matrix import MAX_RESUMERS, Matrix, crash_row, crash_test, resolve_points
from crashlab.harness.runs import CrashTestAgents, ProcessRun, RowsStopped, RunningAgent, run_agent, run_python, start_agent
from crashlab.harness.verdicts import EXPECTATIONS, FAILURE_EXPECTATIONS, Row, judge, judge_screen

__all__ = ["crash_test", "crash_row", "run_agent", "run_python", "start_agent", "double_crash_pairs", "resolve_points",
           "judge", "Matrix", "Row", "ProcessRun", "RowsStopped", "EXPECTATIONS", "FAILURE_EXPECTATIONS", "BASELINE",
           "RunningAgent", "CrashTestAgents", "MatrixOptions", "MAX_RESUMERS", "judge_screen"]
