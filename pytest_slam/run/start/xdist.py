"""xdist hooks (registered only when xdist is loaded): reports out of a worker, into the controller.

Workers publish plain data under ``workeroutput["slam"]`` at session finish; the controller merges it
here. A worker that crashed may have published nothing (``error`` is set): its tests' reports, which
carry the outcomes, have already arrived, so only its golden visits are missing.

What crosses (a report, the payload) holds model text: run/workers/crossing.py carries it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_slam.records import JSON
from pytest_slam.run.workers.crossing import CARRIED, received, sent, uncarried

if TYPE_CHECKING:
    from pytest_slam.run.start.session import SlamSession


class _Gateway(Protocol):
    id: str


class WorkerNode(Protocol):
    """What these hooks use of xdist's ``WorkerController`` (xdist ships no type information)."""

    workerinput: dict[str, JSON]  # plain data xdist ships to the worker
    gateway: _Gateway


class XdistHooks:
    def __init__(self, slam: SlamSession) -> None:
        self.slam = slam

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(
        self, report: pytest.TestReport
    ) -> Generator[None, dict[str, Any] | None, dict[str, Any] | None]:
        data = yield
        if data is None or self.slam.role != "worker":  # --report-log writes what it is given
            return data
        return sent(data)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_from_serializable(self, data: dict[str, Any]) -> None:
        """Restored in place; pytest's own hook then builds the report (firstresult)."""
        received(data)

    def pytest_configure_node(self, node: WorkerNode) -> None:
        from pytest_slam.run.start.progress import WORKER_KEY

        node.workerinput["slam"] = self.slam.worker_input()
        progress = self.slam.progress
        node.workerinput[WORKER_KEY] = progress.channel() if progress is not None else None

    def pytest_testnodedown(self, node: WorkerNode, error: object) -> None:
        output: dict[str, JSON] = getattr(
            node, "workeroutput", {}
        )  # absent when the worker crashed
        payload = output.get("slam")
        if payload is not None and output.get(CARRIED):
            payload = uncarried(payload)
        if payload is not None:
            self.slam.accounting.worker_payloads.append(payload)
        elif self.slam.armed:
            # Its golden visits are lost, so no entry may be called stale in this run.
            self.slam.accounting.workers_lost += 1
            self.slam.summary.append(f"worker {node.gateway.id} sent no pytest-slam data")
