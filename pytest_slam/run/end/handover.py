"""The session hands the end of the run what it kept: ``handed`` builds ``Ended`` (run/end/ended.py).

What is read of the session is declared here, where it is used (``Kept``, a Protocol), so the end
of a run never imports the session that builds it (pyproject's import-linter contract). The swap's
closing lines (redirected hosts, replicas, fetched ahead, limits lowered, the answer cache, cut
answers, diverged calls) are said here, once the swap is done.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_slam.records import Call, ModelSpec, Outcome
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.end.ended import Choices, Ended, Roles, SessionFacts, Setup, SwapTally
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.test.selection import Selection
from pytest_slam.settings import Settings

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.run.inputs.tables import Tables
    from pytest_slam.swap.ahead import Ahead
    from pytest_slam.swap.cache import AnswerCache
    from pytest_slam.swap.router import SwapRouter


class EngineStarted(Protocol):
    """One engine's start (the session's ``EngineStart``): its model, time and cold first call."""

    @property
    def model(self) -> str: ...
    @property
    def start_s(self) -> float | None: ...
    @property
    def cold_call(self) -> Call | None: ...


class Kept(Protocol):
    """What the end reads of the session (run/start/session.py ``SlamSession``)."""

    @property
    def config(self) -> pytest.Config: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def tables(self) -> Tables: ...
    @property
    def role(self) -> str: ...
    @property
    def selection(self) -> Selection: ...
    @property
    def accounting(self) -> Accounting: ...
    @property
    def summary(self) -> Summary: ...
    @property
    def specs(self) -> dict[str, ModelSpec]: ...
    @property
    def reference_spec(self) -> ModelSpec | None: ...
    @property
    def store(self) -> GoldenStore | None: ...
    @property
    def engine_errors(self) -> dict[str, str]: ...
    @property
    def engine_starts(self) -> Sequence[EngineStarted]: ...
    @property
    def router(self) -> SwapRouter | None: ...
    @property
    def ahead(self) -> Ahead | None: ...
    @property
    def cache(self) -> AnswerCache | None: ...
    @property
    def redirected(self) -> set[str]: ...
    @property
    def started(self) -> str: ...
    @property
    def gpu_line(self) -> str: ...


def handed(slam: Kept, session: pytest.Session, exitstatus: int) -> Ended:
    """What the end of the run reads (run/end/finish.py), from the session and pytest's."""
    from pytest_slam.report.terminal import terminal_width
    from pytest_slam.run.workers.shardvisits import shard_ids

    config = slam.config
    option = config.option
    dsession = config.pluginmanager.get_plugin("dsession")
    facts = SessionFacts(
        status=exitstatus,
        collected=session.testscollected,
        stopped=session.shouldfail or session.shouldstop,
        dist_stopped=bool(getattr(dsession, "shouldstop", False)),
        known=config.pluginmanager.get_plugin("session") is not None,
    )
    said = closing_lines(slam)  # first: the fetches ahead end there
    reused = reused_paid(slam)
    if reused is not None and slam.role != "worker":  # a worker's: the controller adds them up
        from pytest_slam.golden.paid import reused_line

        said.append(reused_line(*reused))
    router = slam.router
    swap = SwapTally(
        engine_errors=slam.engine_errors,
        engine_outcomes=engine_outcomes(slam.engine_starts, slam.specs),
        unswapped=router.unswapped if router is not None else 0,
        original_url=original_url(router),
        said=said,
        fetched_ahead=[t.as_dict() for t in slam.ahead.tallies()]
        if slam.ahead is not None and slam.role == "worker"
        else [],
        paid_reused=list(reused) if reused is not None and slam.role == "worker" else [],
        cache=slam.cache.tally() if slam.cache is not None and slam.role == "worker" else {},
    )
    setup = Setup(
        settings=slam.settings,
        specs=slam.specs,
        tables=slam.tables,
        hook=config.hook,
        reference_spec=slam.reference_spec,
        started=slam.started,
        gpu_line=slam.gpu_line,
    )
    return Ended(
        Roles(slam.role, slam.selection, slam.accounting, slam.summary, slam.store),
        setup,
        facts,
        Choices(
            collectonly=bool(option.collectonly),
            prune=bool(getattr(option, "slm_prune", False)),
            baseline=getattr(option, "slm_baseline", None),
            width=terminal_width(config),
        ),
        swap,
        workeroutput=vars(config).get("workeroutput"),
        shard_ids=shard_ids(config),
    )


def closing_lines(slam: Kept) -> list[str]:
    """The swap's last word: hosts redirected, replicas refused, answers fetched ahead, limits
    lowered, the answer cache; then, where the run reports, answers cut and calls diverged."""
    lines = [
        f"calls to {host} were swapped too (redirected at the HTTP transport; "
        "[tool.slam] redirect_hosts lists more hosts)"
        for host in sorted(slam.redirected)  # one line per host: xdist's workers agree on it
    ]
    if slam.router is not None:  # replicas that refused connections (swap/fleet.py)
        lines.extend(slam.router.replica_lines())
        lines.extend(concurrency_lines(slam, slam.router))
    if slam.role != "worker":
        lines.extend(slam.accounting.cap_lines())
        if slam.accounting.outcomes:  # a run that swapped nothing never loads the checks
            from pytest_slam.run.score.checks import diverged_lines

            lines.extend(diverged_lines(slam.accounting.outcomes.having('"diverged_at"')))
        if slam.settings.golden_dir_legacy:
            from pytest_slam.settings import MOVE_GOLDENS

            lines.append(MOVE_GOLDENS)
    return lines


def reused_paid(slam: Kept) -> tuple[int, float] | None:
    """The reference answers this process took from an earlier refresh's paid ones."""
    router = slam.router
    golden = router.golden if router is not None else None
    return golden.reused() if golden is not None else None


def concurrency_lines(slam: Kept, router: SwapRouter) -> list[str]:
    """Answers fetched ahead (used, unused) and limits a server's refusals lowered; the
    fetches still queued or in flight end here; wrapped at the terminal's width, as the report's
    own lines are."""
    from pytest_slam.report.terminal import fit_lines, terminal_width

    lines: list[str] = []
    if slam.ahead is not None:
        slam.ahead.close()
        lines.extend(slam.ahead.lines(counted=slam.role != "worker"))  # a worker's: its tallies
    lines.extend(line for lim in router.limiters.values() if (line := lim.line()))
    if slam.cache is not None and slam.role != "worker" and (line := slam.cache.line()):
        lines.append(line)  # a worker's: its tally, which the controller adds up
    return fit_lines(lines, terminal_width(slam.config))


def original_url(router: SwapRouter | None) -> str:
    """The endpoint unswapped calls went to (the router's, or what the environment names)."""
    from pytest_slam.swap.router import Upstream

    if router is not None:
        return router.original.base_url
    return Upstream.from_env(dict(os.environ)).base_url


def engine_outcomes(
    starts: Sequence[EngineStarted], specs: Mapping[str, ModelSpec]
) -> list[dict[str, Any]]:
    """Each candidate engine's cold first call, as an outcome of its own that the percentiles
    leave out (a judge's or a reference's engine is no model row of the verdict)."""
    return [
        Outcome(
            nodeid=f"(engine start: {start.model})",
            test="(engine start)",
            model=start.model,
            outcome="engine",
            duration_s=start.start_s or 0.0,
            calls=[start.cold_call],
        ).as_dict()
        for start in starts
        if start.cold_call is not None and start.model in specs
    ]
