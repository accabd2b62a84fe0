"""Which requests each selected test will send its candidate, read from the goldens, in test order:
what swap/ahead.py fetches before the tests ask.

Every golden entry keeps the request, the tests that asked it and at which call (``turns``). A
test's first call never depends on an earlier answer; a later call is planned with it when its
request's structure carries none (golden/foresee.py: no assistant or tool message, no earlier
answer as a whole message or field; a word of the instructions an answer also is is none). A
later call that does depend (a conversation's next turn, a tool loop's, a chain that quotes an
answer) is foreseen when the earlier call, fetched ahead, answers: its golden request with that
answer in place of the recorded one (``Chain``, the fetched call's ``follow_up``). Either is used
only when it is the very request the test sends. A test run N times (``--slm-repeat``) asks each
of those N times. The plan is made within a window of the tests about to run (run/test/entry.py), so
memory stays flat however long the suite; under xdist each worker plans only the tests it has been
handed (``foreign.xdist_pending``). A refresh plans the reference's requests by the same rule
(``plan_reference``, golden/prefetch.py), its later turns with the reference's new answer where
the conversation was fed by the reference's own.
"""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pytest

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.foresee import Answer, depends, foreseen
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.lazy import LazyEntries
from pytest_slam.golden.misses import noted
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import JSON, GoldenRecord, ModelSpec
from pytest_slam.run.score.pairing import wants_reference
from pytest_slam.run.test.optin import base_test_id, module_of
from pytest_slam.swap.ahead import MIN_WINDOW, Planned, window_of
from pytest_slam.swap.chat import generation_cap

Keys = dict[str, dict[int, str]]  # test -> call number -> the key of the reference's entry there
MODULES_KEPT = 4  # modules whose places are kept read (a run moves through its modules in order)


def budget(ceilings: Iterable[int]) -> int:
    """How many calls ahead of the running test are planned: the window of the widest queue
    (swap/ahead.window_of), so a conversation's later turns, foreseen as its earlier answers
    come, find a place in the window at once, and the plan never holds the selection."""
    return window_of(max(ceilings, default=1))


def model_of(item: pytest.Item) -> str | None:
    """The candidate an opted-in test item runs on (its ``slm_model`` parameter)."""
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("slm_model") if callspec is not None else None
    return name if isinstance(name, str) else None


def _placed(records: Iterable[GoldenRecord], tokens: dict[str, int | None]) -> Keys:
    """Each test's entries by call number, by key (and each entry's ``_tokens`` into ``tokens``):
    the records are read one at a time and none is kept."""
    out: Keys = {}
    recorded: dict[str, str] = {}
    for rec in records:
        tokens[rec.key] = _tokens(rec)
        if not rec.answers:
            continue
        at = recorded[rec.key] = _recorded(rec)
        # an entry written before turns were kept names only its tests: a request that holds no
        # earlier answer is taken as a first call (a wrong guess is only a fetch left unused)
        unplaced = (
            [t for t in rec.tests if t not in rec.turns] if not depends(rec.request, []) else []
        )
        for test, turns in [*rec.turns.items(), *((t, [1]) for t in unplaced)]:
            slots = out.setdefault(test, {})
            for turn in turns:
                held = slots.get(turn)
                if held is None or at > recorded[held]:
                    slots[turn] = rec.key
    return out


def _each(entries: Mapping[str, GoldenRecord]) -> Iterable[GoldenRecord]:
    return entries.each() if isinstance(entries, LazyEntries) else entries.values()


def _recorded(rec: GoldenRecord) -> str:
    return rec.answers[0].recorded_at or "" if rec.answers else ""


@dataclass
class Module:
    """A module's goldens as the planner reads them: each test's places by entry key, each
    entry's reference answer length by key (a foreseen turn's cap, as its live call's would read
    it), and the entries, a test's read when it is planned (issue 53: the plan kept every record
    of the module, 20 MiB at 5,000 entries, whichever tests ran)."""

    places: Keys
    tokens: dict[str, int | None]
    entries: Mapping[str, GoldenRecord]

    @classmethod
    def read(cls, store: GoldenStore, module: str) -> Module:
        tokens: dict[str, int | None] = {}
        try:
            entries = store.load(module).entries
            return cls(_placed(_each(entries), tokens), tokens, entries)
        except GoldenError:
            return cls({}, {}, {})  # the test says what is wrong with the file; nothing is fetched

    def turns(self, test: str) -> dict[int, GoldenRecord]:
        """``test``'s entries by call number (none when the file has become unreadable since)."""
        try:
            found = {turn: self.entries.get(key) for turn, key in self.places.get(test, {}).items()}
        except GoldenError:
            return {}
        return {turn: rec for turn, rec in found.items() if rec is not None}


def answer_of(planned: Planned) -> Answer | None:
    """What the fetched call answered, as the product reads it (None: no answer)."""
    call = planned.result.call if planned.result is not None else None
    if call is None or not call.ok:
        return None
    return call.text, call.tool_calls


def recorded_answers(rec: GoldenRecord) -> list[Answer]:
    return [(a.text, a.tool_calls) for a in rec.answers]


def _same_answer(one: Answer, other: Answer) -> bool:
    names = [[(c.get("function") or {}) for c in a[1] or []] for a in (one, other)]
    return one[0].strip() == other[0].strip() and names[0] == names[1]


@dataclass(eq=False)
class Chain:
    """One test's calls to one model (one of its repeats), as their answers come: each later call
    that depends on an earlier answer is foreseen once every call before it has answered, from
    its golden request and what was sent and answered before it (golden/foresee.py)."""

    turns: dict[int, GoldenRecord]  # call number -> its golden entry
    make: Callable[[Chain, int, dict[str, JSON]], Planned | None]  # a call's, for its body
    own: bool = True  # the answering model fed the conversation when it was recorded
    # what each call sent (as recorded, or foreseen), by call number
    bodies: dict[int, dict[str, JSON]] = field(default_factory=dict)
    answers: dict[int, Answer] = field(default_factory=dict)
    waiting: list[int] = field(default_factory=list)  # the dependent calls not yet foreseen
    swaps: dict[str, str] = field(default_factory=dict)  # an answer as recorded -> as given now
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, turn: int, planned: Planned) -> Planned | None:
        """``planned`` (call ``turn``) answered: the next dependent call, when it can now be
        foreseen (the hook swap/ahead.py calls from a fetching thread)."""
        given = answer_of(planned)
        if given is None:
            return None
        with self.lock:
            if turn in self.answers:  # another sample of a refresh's: the first one is followed
                return None
            self.answers[turn] = given
            for old in recorded_answers(self.turns[turn]):  # a later field that held it
                if old[0].strip():
                    self.swaps[old[0].strip()] = given[0].strip()
            if not self.waiting or any(
                t not in self.answers for t in self.turns if t < self.waiting[0]
            ):
                return None  # nothing left to foresee, or an answer it needs has not come yet
            after = self.waiting.pop(0)
            try:
                body = self._foreseen(after)
            except Exception:  # a request it cannot read is not foreseen: its test asks it live
                body = None
            if body is None:
                return None
            self.bodies[after] = body
        return self.make(self, after, body)

    def _foreseen(self, after: int) -> dict[str, JSON] | None:
        """Call ``after``'s request now, continuing the latest call before it that it continues
        (a conversation goes on from its last turn; a call beside it may come between)."""
        for turn in sorted((t for t in self.bodies if t < after), reverse=True):
            body = foreseen(
                self.turns[turn].request,
                self.turns[after].request,
                self.bodies[turn],
                self.answers[turn],
                self.swaps,
                functools.partial(self._owns, turn),
            )
            if body is not None:
                return body
        return None

    def _owns(self, turn: int, recorded: Answer) -> bool:
        """Whether the answer recorded at call ``turn`` was the answering model's to give: a
        candidate's always (the test sends it its own); the reference's in a refresh only where
        it is one of the reference's recorded answers there (else the candidate fed it then, and
        would again)."""
        if self.own:
            return True
        return any(_same_answer(recorded, old) for old in recorded_answers(self.turns[turn]))


@dataclass
class Planner:
    """Plans the requests of the tests about to run (a window of the selection, or a worker's
    share), and the calls their answers let it foresee."""

    store: GoldenStore
    specs: dict[str, ModelSpec]
    repeat: int = 1
    cap: tuple[float, int] = (2.0, 64)
    # the test's judge pair of a planned request (judge_ahead.py), worked out in this thread:
    # what a fetched answer's follower needs to ask the judge ahead
    judging: Callable[[pytest.Item, GoldenRecord, ModelSpec], object | None] | None = None
    budget: int = MIN_WINDOW  # calls planned ahead of the running test (``take``)
    through: int = -1  # the last test taken to be planned
    _modules: collections.OrderedDict[str, Module] = field(default_factory=collections.OrderedDict)
    _planned: set[int] = field(default_factory=set)
    _referenced: set[int] = field(default_factory=set)
    _reference_keys: set[tuple[str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ahead: collections.deque[tuple[int, int]] = field(default_factory=collections.deque)
    _calls_ahead: int = 0  # the calls of the tests in ``_ahead`` (taken, not yet run)

    def take(
        self, items: Iterable[tuple[int, pytest.Item]], running: int
    ) -> list[tuple[int, pytest.Item]]:
        """The tests of ``items`` (in order, after the one at ``running``) to plan now: as many
        as keep the calls planned ahead of the running test within ``budget`` (each test's
        every call, its later turns included; at least one a test), so memory stays flat in the
        number of tests, and each test is taken once."""
        while self._ahead and self._ahead[0][0] <= running:
            self._calls_ahead -= self._ahead.popleft()[1]
        out: list[tuple[int, pytest.Item]] = []
        for order, item in items:
            if self._calls_ahead >= self.budget:
                break
            calls = max(1, self._calls(item) * self.repeat)
            self._ahead.append((order, calls))
            self._calls_ahead += calls
            self.through = max(self.through, order)
            out.append((order, item))
        return out

    def _calls(self, item: pytest.Item) -> int:
        name = self._candidate(item)
        if name is None:
            return 0
        places = self._module(module_of(item.nodeid)).places
        return len(places.get(base_test_id(item.nodeid, name), {}))

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
            module = module_of(item.nodeid)
            read = self._module(module)
            turns = read.turns(base_test_id(item.nodeid, name))
            contexts = {
                turn: self.judging(item, rec, spec) if self.judging is not None else None
                for turn, rec in turns.items()
            }

            make = functools.partial(self._call, item.nodeid, order, spec, read.tokens, contexts)
            test = base_test_id(item.nodeid, name)
            for _ in range(self.repeat):
                chain = Chain(turns, make)
                for turn, rec in self._first(chain):
                    if noted(self.store, module, test, rec):  # golden/misses.py: not sent last run
                        continue
                    chain.bodies[turn] = rec.request
                    out.setdefault(name, []).append(make(chain, turn, rec.request))
        return out

    def plan_reference(
        self, items: Iterable[tuple[int, pytest.Item]], spec: ModelSpec, samples: int = 1
    ) -> list[Planned]:
        """A refresh's requests to the reference (golden/prefetch.py), ``samples`` times each:
        a module's request once, for the first of these tests that asks it (a run records each
        entry once, whichever test asks it first), claimable by any test of the module; a later
        turn foreseen when the reference's answer before it comes."""
        out: list[Planned] = []
        for order, item in items:
            if order in self._referenced:
                continue
            self._referenced.add(order)
            name = self._candidate(item)
            if name is None:
                continue
            module = module_of(item.nodeid)
            turns = self._module(module).turns(base_test_id(item.nodeid, name))

            asks = functools.partial(self._asks, item.nodeid, order, spec, module, samples)
            chain = Chain(turns, functools.partial(_first_of, asks), own=False)
            for turn, rec in self._first(chain):
                chain.bodies[turn] = rec.request
                out.extend(asks(chain, turn, rec.request))
        return out

    def _call(
        self,
        nodeid: str,
        order: int,
        spec: ModelSpec,
        tokens: dict[str, int | None],
        contexts: dict[int, object | None],
        chain: Chain,
        turn: int,
        body: dict[str, JSON],
    ) -> Planned:
        """A candidate's call ``turn`` of a test, with ``body``: capped as its live call would be
        (the reference's answer length where the golden file has this very request)."""
        key = _key(chain.turns[turn], body)
        cap = generation_cap(body, spec, tokens.get(key), *self.cap)
        follow = functools.partial(chain.answered, turn) if chain.waiting else None
        context = contexts.get(turn)
        return Planned(nodeid, spec.name, key, body, cap, order, context=context, follow_up=follow)

    def _asks(
        self,
        nodeid: str,
        order: int,
        spec: ModelSpec,
        module: str,
        samples: int,
        chain: Chain,
        turn: int,
        body: dict[str, JSON],
    ) -> list[Planned]:
        """A refresh's asks of ``body`` (``samples``), unless a test of its module planned it."""
        key = _key(chain.turns[turn], body)
        with self._lock:  # also called from a fetching thread
            if (module, key) in self._reference_keys:
                return []
            self._reference_keys.add((module, key))
        follow = functools.partial(chain.answered, turn) if chain.waiting else None
        return [
            Planned(nodeid, spec.name, key, body, None, order, module, follow_up=follow)
            for _ in range(samples)
        ]

    def _first(self, chain: Chain) -> list[tuple[int, GoldenRecord]]:
        """The test's calls known before any answer, in call order; the others wait in ``chain``
        for the answers they depend on."""
        first: list[tuple[int, GoldenRecord]] = []
        earlier: list[str] = []
        for turn in sorted(chain.turns):
            rec = chain.turns[turn]
            if turn == 1 or not depends(rec.request, earlier):
                first.append((turn, rec))
            else:
                chain.waiting.append(turn)
            earlier.extend(answer.text for answer in rec.answers if answer.text)
        return first

    def _candidate(self, item: pytest.Item) -> str | None:
        """The candidate a test runs on, when it is paired with goldens and not skipped."""
        name = model_of(item)
        if name is None or name not in self.specs or not wants_reference(item):
            return None
        return None if item.get_closest_marker("skip") is not None else name

    def _module(self, module: str) -> Module:
        """A module's goldens as planned, read once while the run is in it (a few kept)."""
        read = self._modules.get(module)
        if read is None:
            read = self._modules[module] = Module.read(self.store, module)
            while len(self._modules) > MODULES_KEPT:
                self._modules.popitem(last=False)
        self._modules.move_to_end(module)
        return read


def _key(rec: GoldenRecord, body: dict[str, JSON]) -> str:
    """A planned request's golden key: its entry's as recorded, else the key of the request
    foreseen (what the router keys the product's request by: golden.keys.request_key)."""
    return rec.key if body is rec.request else request_key(body)


def _first_of(
    make: Callable[[Chain, int, dict[str, JSON]], list[Planned]],
    chain: Chain,
    turn: int,
    body: dict[str, JSON],
) -> Planned | None:
    """A refresh's foreseen turn: its first sample (the others are asked by its recording)."""
    made = make(chain, turn, body)
    return made[0] if made else None


def _tokens(rec: GoldenRecord) -> int | None:
    """The reference's completion tokens, as the live call's cap reads them
    (ReferenceService.completion_tokens)."""
    known = [a.completion_tokens for a in rec.answers if isinstance(a.completion_tokens, int)]
    return max(known) if known else None
