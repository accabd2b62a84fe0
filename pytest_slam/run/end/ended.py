"""What the session hands the end of a run (run/end/handover.py builds it, run/end/collect.py reads it).

Typed groups instead of one bag: pytest's session facts, the role objects, the run's setup, the
command line's choices, what the swap saw. Plain values: unit tests build them without pytest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_slam.records import JSON, ModelSpec
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.test.selection import Selection
from pytest_slam.settings import Settings

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.run.inputs.tables import Tables


@dataclass(frozen=True)
class SessionFacts:
    """What the end reads of pytest's session (plain values: unit tests build them)."""

    status: int = 0  # the exit status pytest hands pytest_sessionfinish
    collected: int = 0  # session.testscollected
    stopped: str | bool = False  # session.shouldfail or session.shouldstop
    dist_stopped: bool = False  # xdist's controller stopped its workers (-x under -n)
    known: bool = True  # pytest's session is registered (it always is in a real run)


@dataclass(frozen=True)
class Roles:
    """The role objects the run kept (selection, accounting, summary) and its golden store."""

    role: str
    selection: Selection
    accounting: Accounting
    summary: Summary
    store: GoldenStore | None = None


@dataclass(frozen=True)
class Setup:
    """What the run was set up with: its settings and tables, models, start and GPU line.
    ``hook``: pytest's hook relay (hookspecs.py: the gate's and the report's hooks)."""

    settings: Settings
    specs: dict[str, ModelSpec]
    tables: Tables
    hook: Any
    reference_spec: ModelSpec | None = None
    started: str = ""
    gpu_line: str = ""


@dataclass(frozen=True)
class Choices:
    """The command line's say on the end: --collect-only, --slm-prune, --slm-baseline, the width."""

    collectonly: bool = False
    prune: bool = False
    baseline: str | None = None
    width: int = 100  # the terminal's


@dataclass(frozen=True)
class SwapTally:
    """What the swap saw: engines that did not start, their cold first calls, unswapped calls."""

    engine_errors: dict[str, str] = field(default_factory=dict)
    engine_outcomes: list[dict[str, Any]] = field(default_factory=list)
    unswapped: int = 0  # requests that went to the original endpoint (the router's count)
    original_url: str = ""  # that endpoint
    said: list[str] = field(default_factory=list)  # the swap's closing lines (handover.py)
    # an xdist worker's answers fetched ahead, per queue (swap/ahead.FetchTally.as_dict): the
    # controller says one line for its workers
    fetched_ahead: list[dict[str, str | int]] = field(default_factory=list)
    # an xdist worker's reference answers reused from an earlier refresh: [count, paid at]
    paid_reused: list[float] = field(default_factory=list)
    cache: dict[str, str | int] = field(default_factory=dict)  # a worker's (swap/cache.py tally)


@dataclass(frozen=True)
class Ended:
    """Collect's one input: what the session hands the end (run/end/handover.py builds it).
    ``workeroutput``: xdist's, on a worker; ``shard_ids``: collected/selected (shardvisits)."""

    roles: Roles
    setup: Setup
    facts: SessionFacts = field(default_factory=SessionFacts)
    choices: Choices = field(default_factory=Choices)
    swap: SwapTally = field(default_factory=SwapTally)
    workeroutput: dict[str, object] | None = None
    shard_ids: dict[str, JSON] = field(default_factory=dict)

    def partial_reason(self, own_selection: bool = False) -> str | None:
        """Why this run did not run every collected test to its end (Accounting's; None: it did).

        ``own_selection``: whether the run's own selection (-k, node ids: a shard) ran to its end.
        """
        facts, roles = self.facts, self.roles
        if not facts.known:
            return "pytest's session is unknown"
        stopped = facts.stopped or facts.dist_stopped
        return roles.accounting.partial_reason(
            roles.selection,
            self.swap.engine_errors,
            facts.status,
            stopped,
            facts.collected,
            own_selection,
        )
