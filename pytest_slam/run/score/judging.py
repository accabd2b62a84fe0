"""The ``[tool.slam] judge`` model as the judge scorer calls it, and the cache of its verdicts in
the golden files.

The judge is asked directly at its own base URL (never through the candidate route), at
temperature 0, and its calls go on the test's outcome (role "judge"): they are the judge's latency
and cost, not the candidate's. Its verdicts are kept in the ``judge`` dict of the pair's golden
record, written when the store flushes, so a CI run replays verdicts without the judge; in replay
mode a verdict not cached yet is kept in memory for this run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pytest_slam.compare.scorer import ScorerError
from pytest_slam.records import JSON, Call, GoldenRecord, ModelSpec

if TYPE_CHECKING:
    from pytest_slam.compare.judge import MemoryJudgeCache
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.swap.chat import Target

JUDGE_MAX_TOKENS = 512
UNJUDGED = "unjudged"  # Call.error_kind of a judge call that gave no readable verdict


class JudgeNotCached(ScorerError, kind="judge"):
    """A judge verdict that is not cached, asked where no judge may be called (``slam rescore``)."""


class AskedAhead(Protocol):
    """The judge's calls asked ahead of the tests (judge_ahead.py), by their exact request."""

    def take(self, body: dict[str, JSON]) -> Call | None:
        """The call asked ahead with this very body (waited for while in flight), or None: the
        caller asks it live, and it is never asked ahead after that."""
        ...


@dataclass
class JudgeModel:
    """The ``[tool.slam] judge`` model as the judge scorer's ``complete(messages) -> str``.

    Called directly at its own base URL (never through the candidate route), at temperature 0.
    A request asked ahead (``ahead``: the very same body) is answered by that call.
    """

    spec: ModelSpec
    timeout_s: float = 120.0  # unless the judge's model table sets its own timeout_s
    calls: list[Call] = field(default_factory=list)  # made since the last test: Checker takes them
    offline: bool = False  # cached verdicts only (slam rescore): a verdict not cached stays unknown
    ahead: AskedAhead | None = None  # the judge's calls asked ahead of the tests, if any

    def complete(self, messages: list[dict[str, str]]) -> str:
        from pytest_slam.compare.scorer import ScorerUnavailable
        from pytest_slam.swap.chat import forward_chat

        spec = self.spec
        if self.offline:
            raise JudgeNotCached(f"judge {spec.name!r} has no cached verdict for this pair")
        body = judge_body(spec, messages)
        call = self.ahead.take(body) if self.ahead is not None else None
        if call is None:
            call = forward_chat(judge_target(spec), body, timeout=self.timeout()).call
        self.calls.append(call)
        if not call.ok:
            raise ScorerUnavailable(f"judge {spec.name!r} failed: {call.error}; {_JUDGE_FIX}")
        return call.text

    def timeout(self) -> float:
        """Seconds without data before a judge call fails: its model table's, else the run's."""
        return self.spec.timeout_s if self.spec.timeout_s is not None else self.timeout_s


def judge_body(spec: ModelSpec, messages: list[dict[str, str]]) -> dict[str, JSON]:
    """The judge's request for these messages: the one body, live or asked ahead."""
    return {
        "model": spec.model_id,
        "messages": list(messages),
        "temperature": 0,
        "max_tokens": JUDGE_MAX_TOKENS,
    }


def judge_target(spec: ModelSpec) -> Target:
    """Where the judge is asked: its own first server, with its key (never recorded)."""
    from pytest_slam.compare.scorer import ScorerUnavailable
    from pytest_slam.swap.chat import Target

    if not spec.base_urls:
        raise ScorerUnavailable(f"judge {spec.name!r} has no running server; {_JUDGE_FIX}")
    key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    return Target(spec, spec.base_urls[0], key, role="judge")


_JUDGE_FIX = (
    "start it or fix [tool.slam] judge. Verdicts cached in the golden files replay without it; "
    "cache new ones with --slm-record=new while the judge is reachable"
)


@dataclass
class GoldenJudgeCache:
    """The judge cache protocol over one golden record's ``judge`` dict.

    ``put`` buffers the record (with the new verdict) in the golden store, which writes it at
    flush; in replay mode it keeps the verdict in ``memory`` instead and calls ``unsaved``.
    """

    store: GoldenStore
    module: str
    record: GoldenRecord
    test: str
    writes: bool
    memory: MemoryJudgeCache  # shared by the run
    unsaved: Callable[[str], None] | None = None  # told the module of a verdict kept in memory

    def get(self, key: str) -> dict[str, JSON] | None:
        return self.record.judge.get(key) or self.memory.get(key)

    def put(self, key: str, verdict: dict[str, JSON]) -> None:
        if not self.writes:
            self.memory.put(key, verdict)
            if self.unsaved is not None:
                self.unsaved(self.module)
            return
        current = self.store.lookup(self.module, self.record.key) or self.record
        self.record = dataclasses.replace(current, judge={**current.judge, key: verdict})
        self.store.record(self.module, self.record, self.test)
