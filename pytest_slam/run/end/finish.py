"""The end of a run in three typed stages: collect -> judge -> publish.

- ``collect`` (run/end/collect.py): ``Ended`` (run/end/ended.py: what the session hands over) ->
  ``Collected``: golden files flushed, a worker's payload, the workers' payloads merged, stale
  entries found or pruned (run/end/unvisited.py), the outcomes and the run's info.
- ``judge`` (run/end/judge_stage.py): ``Collected`` -> ``Judged``: the verdict, the baseline diff,
  budgets and the gate, the committed human review, the exit status (run/end/exitstatus.py).
- ``publish`` (run/end/publish.py): ``Judged`` -> ``Exit``: the table of writers (a worker's
  payload, the stale report, the JSON and HTML reports, the GitHub step summary, the saved run)
  and the summary's lines.

A worker only flushes its goldens and publishes what it saw; the controller (or the serial
process) merges, reports and gates. Every path, the run that armed nothing included, ends in
``exitstatus.run_exit``, the one rule of the run's exit status. None of it imports the session.
"""

from __future__ import annotations

from pytest_slam.run.end.collect import collect
from pytest_slam.run.end.ended import Ended
from pytest_slam.run.end.exitstatus import Exit, run_exit
from pytest_slam.run.end.judge_stage import judge
from pytest_slam.run.end.publish import publish
from pytest_slam.util.gcpause import gc_paused


def finish(ended: Ended) -> Exit:
    """The end of the run, stage after stage; its exit status as ``run_exit`` decided it.

    The collector is paused throughout: it builds records over every outcome, all of them live
    until the run ends, and a full collection walking the run's heap there cost 0.1-0.2 s a
    thousand tests (bench/README.md section 20).
    """
    if not ended.roles.selection.armed:  # nothing swapped: the swap's own lines, if any
        ended.roles.summary.extend(ended.swap.said)
        return run_exit(ended.facts.status, "off")
    with gc_paused():
        return publish(judge(collect(ended)))
