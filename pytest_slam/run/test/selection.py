"""Collection and selection: which tests run once per model, and how much of the suite this run saw.

Its own object so that what "this run covered" means (modules whose every test ran, minus those a
``-k`` or a node id narrowed) is testable without a pytest run; the stale check reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_slam.run.test.optin import module_of


def not_enabled_line(nodeids: list[str]) -> str:
    """One line for opted-in tests in a run where pytest-slam is not enabled."""
    more = len(nodeids) - 1
    others = f" (and {more} more test(s))" if more else ""
    return (
        f"pytest-slam: {nodeids[0]}{others} opts in to model swapping, but pytest-slam is not "
        "enabled for this run: add a [tool.slam] table to pyproject.toml, or pass "
        "--slm-models=smollm2-135m."
    )


@dataclass
class Selection:
    """What this process collected and selected; a worker reports its part (``Accounting``)."""

    armed: bool  # pytest-slam is enabled for this run
    role: str  # serial, controller or worker (session.process_role)
    models: list[str]  # the candidates, in order: each opted-in test runs once per model
    rootpath: Path
    args: list[str] = field(default_factory=list)  # the command line's file and node id arguments
    opt_in_paths: list[Path] = field(default_factory=list)
    not_enabled: list[str] = field(default_factory=list)  # opted-in tests of an unarmed run
    coverage: set[str] = field(default_factory=set)  # modules with a swapped test collected
    partial: set[str] = field(default_factory=set)  # modules with a deselected test
    deselected_count: int = 0
    collect_errors: int = 0

    @property
    def node_ids(self) -> list[str]:
        """The node ids the run was narrowed to (``path::test``), as given."""
        return [a for a in self.args if "::" in a]

    def parametrize(self, metafunc: pytest.Metafunc) -> None:
        from pytest_slam.run.test.optin import parametrize

        if not self.armed:  # said once, after collection (``collected``): not a collection error
            self.not_enabled.append(metafunc.definition.nodeid)
            return
        parametrize(metafunc, self.models)

    def collected(self, items: list[pytest.Item]) -> None:
        from pytest_slam.run.test.hypothesis_support import adjust

        if self.not_enabled and self.role != "worker":  # a worker's tests fail one by one
            raise pytest.UsageError(not_enabled_line(self.not_enabled))
        swapped = [i for i in items if self.is_swapped(i)]
        for item in swapped:
            adjust(item)
        self.cover([i.nodeid for i in swapped])

    def cover(self, nodeids: list[str]) -> None:
        """The modules of these swapped tests are covered, unless a node id narrowed them."""
        self.coverage.update(module_of(n) for n in nodeids)
        root = str(self.rootpath) + "/"
        self.coverage -= {module_of(a.replace(root, "")) for a in self.node_ids}

    def deselected(self, nodeids: list[str]) -> None:
        self.partial.update(module_of(n) for n in nodeids)
        self.deselected_count += len(nodeids)

    def collect_failed(self) -> None:
        self.collect_errors += 1

    def covered(self) -> list[str]:
        """Modules whose every collected test was selected: the ones stale entries are judged in."""
        return sorted(self.coverage - self.partial)

    def is_swapped(self, item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        return callspec is not None and "slm_model" in callspec.params and self.armed
