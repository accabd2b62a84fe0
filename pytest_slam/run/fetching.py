"""Which requests each selected test will send its candidate, read from the goldens, in test order:
what swap/ahead.py fetches before the tests ask.

Every golden entry keeps the request, the tests that asked it and at which call (``turns``). A
test's first call never depends on an earlier answer; a later call is planned only when its
request carries no assistant or tool message and none of the reference's earlier answers in that
test (a conversation's later turns hold the candidate's own answers, unknown until it gives them).
A test run N times (``--slm-repeat``) asks each of those N times. Under xdist each worker plans
only the tests it has been handed (``foreign.xdist_pending``), as it is handed them. A refresh
plans the reference's requests by the same rule (``plan_reference``, golden/prefetch.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pytest

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.misses import noted
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import JSON, GoldenRecord, ModelSpec
from pytest_slam.run.optin import base_test_id, module_of
from pytest_slam.run.pairing import wants_reference
from pytest_slam.swap.ahead import Planned
from pytest_slam.swap.chat import generation_cap

MIN_ECHO = 8  # an earlier answer this long found in a later request: that request depends on it

Places = dict[str, dict[int, GoldenRecord]]  # test -> call number -> the reference's entry there


def model_of(item: pytest.Item) -> str | None:
    """The candidate an opted-in test item runs on (its ``slm_model`` parameter)."""
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("slm_model") if callspec is not None else None
    return name if isinstance(name, str) else None


def places(store: GoldenStore, module: str) -> Places:
    """Each test's golden entries by call number, read once per module (the latest recorded
    where a place has several: the one a replay of the same request would meet)."""
    out: Places = {}
    try:
        records = list(store.load(module).entries.values())
    except GoldenError:
        return out  # the test says what is wrong with the file; nothing is fetched for it
    for rec in records:
        if not rec.answers:
            continue
        # an entry written before turns were kept names only its tests: a request that holds no
        # earlier answer is taken as a first call (a wrong guess is only a fetch left unused)
        unplaced = (
            [t for t in rec.tests if t not in rec.turns] if independent(rec.request, []) else []
        )
        for test, turns in [*rec.turns.items(), *((t, [1]) for t in unplaced)]:
            slots = out.setdefault(test, {})
            for turn in turns:
                held = slots.get(turn)
                if held is None or _recorded(rec) > _recorded(held):
                    slots[turn] = rec
    return out


def _recorded(rec: GoldenRecord) -> str:
    return rec.answers[0].recorded_at or "" if rec.answers else ""


def independent(request: dict[str, JSON], earlier: list[str]) -> bool:
    """A later call's request that no earlier answer went into."""
    messages = request.get("messages")
    if not isinstance(messages, list):
        return False
    for message in messages:
        if not isinstance(message, dict) or message.get("role") in ("assistant", "tool"):
            return False
    text = json.dumps(messages, ensure_ascii=False)
    return not any(len(answer) >= MIN_ECHO and answer in text for answer in earlier)


@dataclass
class Planner:
    """Plans the requests of the tests about to run (the whole selection, or a worker's share)."""

    store: GoldenStore
    specs: dict[str, ModelSpec]
    repeat: int = 1
    cap: tuple[float, int] = (2.0, 64)
    # the test's judge pair of a planned request (judge_ahead.py), worked out in this thread:
    # what a fetched answer's follower needs to ask the judge ahead
    judging: Callable[[pytest.Item, GoldenRecord, ModelSpec], object | None] | None = None
    _modules: dict[str, Places] = field(default_factory=dict)
    _planned: set[int] = field(default_factory=set)
    _referenced: set[int] = field(default_factory=set)
    _reference_keys: set[tuple[str, str]] = field(default_factory=set)

    def plan(self, items: Iterable[tuple[int, pytest.Item]]) -> dict[str, list[Planned]]:
        """The requests of these (order, item) pairs not planned before, by candidate."""
        out: dict[str, list[Planned]] = {}
        for order, item in items:
            if order in self._planned:
                continue
            self._planned.add(order)
            name = self._candidate(item)
            if name is None:
                continue
            spec = self.specs[name]
            for rec in self._independent(item, name):
                cap = generation_cap(rec.request, spec, _tokens(rec), *self.cap)
                context = self.judging(item, rec, spec) if self.judging is not None else None
                for _ in range(self.repeat):
                    planned = Planned(
                        item.nodeid, spec.name, rec.key, rec.request, cap, order, context=context
                    )
                    out.setdefault(name, []).append(planned)
        return out

    def plan_reference(
        self, items: Iterable[tuple[int, pytest.Item]], spec: ModelSpec, samples: int = 1
    ) -> list[Planned]:
        """A refresh's requests to the reference (golden/prefetch.py), ``samples`` times each:
        a module's request once, for the first of these tests that asks it (a run records each
        entry once, whichever test asks it first), claimable by any test of the module."""
        out: list[Planned] = []
        for order, item in items:
            if order in self._referenced:
                continue
            self._referenced.add(order)
            name = self._candidate(item)
            if name is None:
                continue
            module = module_of(item.nodeid)
            for rec in self._independent(item, name):
                if (module, rec.key) in self._reference_keys:
                    continue
                self._reference_keys.add((module, rec.key))
                out.extend(
                    Planned(item.nodeid, spec.name, rec.key, rec.request, None, order, module)
                    for _ in range(samples)
                )
        return out

    def _candidate(self, item: pytest.Item) -> str | None:
        """The candidate a test runs on, when it is paired with goldens and not skipped."""
        name = model_of(item)
        if name is None or name not in self.specs or not wants_reference(item):
            return None
        return None if item.get_closest_marker("skip") is not None else name

    def _independent(self, item: pytest.Item, name: str) -> Iterator[GoldenRecord]:
        """The test's golden entries, in call order, whose request holds no earlier answer."""
        module = module_of(item.nodeid)
        if module not in self._modules:
            self._modules[module] = places(self.store, module)
        test = base_test_id(item.nodeid, name)
        slots = self._modules[module].get(test, {})
        earlier: list[str] = []
        for turn in sorted(slots):
            rec = slots[turn]
            # golden/misses.py: an entry its test did not send last run is not fetched again
            if (turn == 1 or independent(rec.request, earlier)) and not noted(
                self.store, module, test, rec
            ):
                yield rec
            earlier.extend(answer.text for answer in rec.answers if answer.text)


def _tokens(rec: GoldenRecord) -> int | None:
    """The reference's completion tokens, as the live call's cap reads them
    (ReferenceService.completion_tokens)."""
    known = [a.completion_tokens for a in rec.answers if isinstance(a.completion_tokens, int)]
    return max(known) if known else None
