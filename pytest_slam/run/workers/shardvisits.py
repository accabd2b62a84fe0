"""The ``visits`` a run writes into its JSON report, so shards can be merged and judged for staleness.

What pytest collected before deselection and what it then ran are heard here (``ShardIds``, a
plugin); each xdist worker publishes its own in its payload (finish.py), so the controller, which
collects nothing, reports the union. Completeness is judged for the run's own selection: a shard
chosen by node ids, ``-k`` or pytest-split is complete when everything it selected ran to its end.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_slam.records import JSON

if TYPE_CHECKING:
    from pytest_slam.report.visits import Visits

PLUGIN = "slam-shard-ids"


class ShardIds:
    """Node ids pytest collected and selected in this process.

    Collected ones are taken before any plugin filters the items (a wrapper runs first), since a
    splitter may drop items without calling ``pytest_deselected`` (pytest-split slices them).
    """

    def __init__(self) -> None:
        self.selected: set[str] = set()
        self.seen: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, items: list[pytest.Item]
    ) -> Generator[None, None, None]:
        self.seen.update(item.nodeid for item in items)  # collected, selected or not
        return (yield)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.seen.update(item.nodeid for item in items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = {item.nodeid for item in session.items}


def shard_ids(config: pytest.Config) -> dict[str, JSON]:
    """This process's ``collected`` and ``selected`` node ids, for its payload."""
    ids = config.pluginmanager.get_plugin(PLUGIN)
    if not isinstance(ids, ShardIds):
        return {"collected": [], "selected": []}
    return {"collected": sorted(ids.selected | ids.seen), "selected": sorted(ids.selected)}


def shard_visits(
    payloads: list[dict[str, Any]],
    visited: dict[str, set[str]],
    covered: set[str],
    partial: str | None,
    narrowed: list[str],
    exitstatus: int,
    run: str | None = None,
) -> Visits:
    """The run's visits: golden keys by module, modules run whole, failures, completeness, ids.

    ``payloads``: this process's and each xdist worker's (finish.py ``_payload``); ``partial``:
    why the run's own selection did not run to its end (None: it did); ``run``: the run's
    identity (run/workers/runid.py).
    """
    from pytest_slam.golden.redact import scrub
    from pytest_slam.report.visits import Visits

    visits = Visits(
        visited={m: sorted(keys) for m, keys in sorted(visited.items())},
        modules=sorted(covered),
        failed_tests=sorted({t for data in payloads for t in data["failed_tests"]}),
        complete=partial is None,
        partial=partial,
        collected=sorted({n for data in payloads for n in data.get("collected", [])}),
        selected=sorted({n for data in payloads for n in data.get("selected", [])}),
        narrowed=sorted(narrowed),
        exitstatus=int(exitstatus),
        run=run,
    )
    plain = visits.as_dict()
    scrubbed = scrub(plain)  # a secret in a test's parameters never reaches the report
    return visits if scrubbed is plain else Visits.from_dict(scrubbed)
