"""Core records: plain, JSON-serialisable dataclasses shared by every part of pytest-slam.

Records cross process boundaries (xdist workers -> controller, runs -> JSON reports -> baselines),
so each one round-trips through ``as_dict``/``from_dict`` with only JSON types inside.
Metric fields are named ``<metric>_<unit>`` (``ttft_ms``, ``cost_usd``, ``energy_j``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="Record")

# A value that really is arbitrary JSON (a request body, a usage table): passed along, never read
# field by field here. Everything else in a record has its own type.
JSON = Any


def utc_moment() -> dt.datetime:
    """The one clock: every time the package writes down (goldens, reports, verdicts, trash)."""
    return dt.datetime.now(dt.UTC)


def utc_now() -> str:
    """The one written form of a time: ISO 8601, UTC, to the second, ``Z``-suffixed."""
    return utc_moment().replace(microsecond=0).isoformat().replace("+00:00", "Z")


# A time as a run keeps and writes it (issue 53): to the microsecond, finer than any figure a
# reader is shown (latencies to the millisecond, junit to the millisecond) or a clock on a shared
# machine resolves, not the 16 digits of a float (about 40 bytes a case of the JSON report).
def in_ms(seconds: float) -> float:
    """``seconds`` in milliseconds to 3 decimals: a call's ``ttft_ms``, ``e2e_ms``."""
    return round(seconds * 1000.0, 3)


def to_us(seconds: float) -> float:
    """Seconds to 6 decimals: a moment since the epoch (``started_at``), a test's ``duration_s``."""
    return round(seconds, 6)


_NAMES: dict[type, tuple[str, ...]] = {}
_KNOWN: dict[type, frozenset[str]] = {}
_LOCAL = "slam_local"  # field metadata: the field lives in this process only (``local_field``)


def local_field() -> Any:
    """A field that is work already done, kept for a later step of the same process (the golden
    key a call's swap computed, for its pairing): never written by ``as_dict`` nor read back."""
    return field(default=None, compare=False, repr=False, metadata={_LOCAL: True})


def local_names(cls: Any) -> list[str]:
    """The fields of a record class that ``local_field`` declared: never written."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get(_LOCAL)]


def field_names(cls: type[Record]) -> tuple[str, ...]:
    """A record class's written field names, in order; computed once per class (from_dict runs
    per call)."""
    names = _NAMES.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        names = _NAMES[cls] = tuple(f.name for f in fields if not f.metadata.get(_LOCAL))
    return names


def _known(cls: type[Record]) -> frozenset[str]:
    known = _KNOWN.get(cls)
    if known is None:
        known = _KNOWN[cls] = frozenset(field_names(cls))
    return known


def plain(value: JSON) -> JSON:
    """``value`` as JSON types: records by their own ``as_dict``; containers copied, leaves shared.

    Leaves are JSON scalars (immutable), so this equals ``dataclasses.asdict`` without its
    per-value deep copy, and a nested record keeps its derived keys (``Score.passed``).
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value  # the common leaves first
    if kind is list:
        return [plain(v) for v in value]
    if isinstance(value, Record):
        return value.as_dict()
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def records(cls: type[T], items: Iterable[T | Mapping[str, JSON]]) -> list[T]:
    """Each item as a ``cls`` record: dicts (read from a file or a worker) are converted."""
    return [cls.from_dict(item) if isinstance(item, Mapping) else item for item in items]


class Record:
    """Mixin: ``as_dict`` / ``from_dict`` that ignore unknown keys (newer writers, older readers)."""

    __slots__ = ()  # so a record declared with slots has none of a per-instance dict

    # List fields that hold records, by the record type ``from_dict`` rebuilds them as.
    NESTED: ClassVar[Mapping[str, type[Record]]] = {}

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[JSON]]]

    def as_dict(self) -> dict[str, JSON]:
        return {name: plain(getattr(self, name)) for name in field_names(type(self))}

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, JSON]) -> T:
        known = _known(cls)
        found = {k: v for k, v in data.items() if k in known}
        for name, kind in cls.NESTED.items():
            if name in found:
                found[name] = records(kind, found[name])
        return cls(**found)


@dataclass
class ModelSpec(Record):
    """One model as the user named it, resolved to where and how it is served.

    ``provider`` names its engine provider (``swap.engines.registry.find``: what it needs, how it
    starts, how it is metered). ``base_urls`` is empty until an engine for a local model has
    started; several URLs are replicas of one deployment, used in turn.
    """

    name: str
    provider: str
    model_id: str
    base_urls: list[str] = field(default_factory=list)
    api_key_env: str | None = None
    engine_args: dict[str, JSON] = field(default_factory=dict)
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    hourly_usd: float | None = None
    source: str = "builtin"
    timeout_s: float | None = None  # candidate request timeout, seconds; None: the default
    responses: bool = False  # serves /v1/responses itself: Responses calls are sent as they are
    max_tokens_cap: int = 1024  # hard ceiling of the generation cap (chat.generation_cap)
    concurrency: int | None = None  # calls in flight at once (swap/limits.py); None: its default
    # nobody set ``concurrency``: an endpoint's limit is found (swap/adaptive.py); set at startup
    adaptive: bool | None = local_field()


# unjudged: judge calls only; runaway: a structured answer cut at its cap from the reference
ERROR_KINDS = ("unreachable", "timeout", "http", "fault", "runaway", "unjudged")


@dataclass(slots=True)  # a run holds one per call until its end: 40 fields, no dict each
class Call(Record):
    """One chat completion as served to the product, with what was measured about it.

    TTFT (time to first token) is the first content chunk's arrival minus the request's start;
    E2E is the last chunk's arrival minus the start; both in milliseconds.
    Timings are measured by the swap layer, which always streams from upstream.
    """

    model: str
    role: str  # "candidate" | "reference" | "passthrough"
    request: dict[str, JSON]
    text: str = ""
    finish_reason: str | None = None
    response_model: str | None = None
    system_fingerprint: str | None = None
    tool_calls: list[dict[str, JSON]] | None = None
    logprobs: dict[str, JSON] | None = None  # choice 0's, when the request asked for them
    # n > 1: choices 1.. as {index, text, finish_reason, tool_calls?, logprobs?}
    other_choices: list[dict[str, JSON]] | None = None
    usage_details: dict[str, JSON] | None = None  # usage keys beyond the three token counts
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_estimated: bool = False
    started_at: float = 0.0
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    endpoint: str = ""
    streamed: bool = False
    cold_start: bool = False
    replayed: bool = False
    error: str | None = None
    # What kind of failure ``error`` is (``ERROR_KINDS``), so callers never match on its text.
    error_kind: str | None = None
    cost_usd: float | None = None
    energy_j: float | None = None
    key: str | None = None
    # The request set no output limit, so the swap layer sent ``cap`` tokens as its limit
    # (chat.generation_cap); with finish_reason "length" the cap cut the answer (``cut_by_cap``).
    capped: bool = False
    cap: int | None = None
    # How many calls were in flight on this candidate when this one was sent, itself included
    # (swap/limits.py): latency measured at 8 in flight is not latency at 1. None: not counted.
    in_flight: int | None = None
    # sent alone: nothing else in flight on its server while it ran (swap/limits.py, the latency
    # sample a user meets); the report's percentiles read these where there are any
    alone: bool = False
    fetched_ahead: bool = False  # sent before its test asked (swap/ahead.py), then claimed by it
    # How many calls on its server ended while this one waited for a place under the model's
    # concurrency (swap/limits.py): 0, sent at once. A running test's own call on a managed engine
    # waits for none of the calls fetched ahead (a slot is kept for it). None: not counted.
    waited_for: int | None = None
    # answered from the opt-in answer cache (swap/cache.py): its timings are those of the run
    # that first asked it, not this run's
    cached: bool = False
    # The golden key of ``request``, computed once by the swap when the call was sent and read by
    # its pairing (golden.keys.request_key; None: not computed). ``key`` is the pair's entry.
    request_key: str | None = local_field()

    @property
    def cut_by_cap(self) -> bool:
        """The answer ended at the limit pytest-slam set, not at one the product asked for."""
        return self.capped and self.finish_reason == "length"

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tpot_ms(self) -> float | None:
        """(E2E - TTFT) / (completion_tokens - 1); undefined for fewer than two tokens."""
        if self.e2e_ms is None or self.ttft_ms is None or not self.completion_tokens:
            return None
        if self.completion_tokens < 2:
            return None
        return (self.e2e_ms - self.ttft_ms) / (self.completion_tokens - 1)

    @property
    def tokens_per_s(self) -> float | None:
        """completion_tokens / E2E."""
        if not self.e2e_ms or self.completion_tokens is None:
            return None
        return self.completion_tokens / (self.e2e_ms / 1000.0)

    def as_dict(self) -> dict[str, JSON]:
        # Shallow on purpose: a Call is final once its test ends, and a deep copy of every request
        # cost a quarter of a millisecond per test (bench/profile_run.py).
        data = {name: getattr(self, name) for name in field_names(Call)}
        data["tpot_ms"] = self.tpot_ms
        data["tokens_per_s"] = self.tokens_per_s
        data["cut_by_cap"] = self.cut_by_cap
        return data


def spent(call: Call) -> bool:
    """Whether a call generated an answer, so its tokens, cost and time count: it succeeded, or it
    ran away (``error_kind`` "runaway": generated until the cap stopped it)."""
    return call.error is None or call.error_kind == "runaway"


@dataclass
class GoldenAnswer(Record):
    """One recorded answer of the reference model, with how it was obtained."""

    text: str
    model: str | None = None  # the model id the API returned
    recorded_at: str | None = None  # ISO 8601, UTC
    finish_reason: str | None = None
    tool_calls: list[dict[str, JSON]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    system_fingerprint: str | None = None
    logprobs: dict[str, JSON] | None = None  # as Call: absent unless the request asked for them
    other_choices: list[dict[str, JSON]] | None = None  # n > 1: choices 1.., in index order
    usage_details: dict[str, JSON] | None = None  # e.g. prompt_tokens_details, as the API sent it


@dataclass
class GoldenRecord(Record):
    """The reference's answers to one canonical request, as kept in a golden file."""

    key: str
    request: dict[str, JSON]
    answers: list[GoldenAnswer] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    judge: dict[str, JSON] = field(default_factory=dict)  # cached judge verdicts, by judge key
    # Where the request was asked: test -> its call positions (1-based) in that test, so a later
    # turn whose exact request differs finds the reference's turn at its place (golden.turns).
    # Absent in files written before it (and left out of a file while empty).
    turns: dict[str, list[int]] = field(default_factory=dict)

    NESTED = {"answers": GoldenAnswer}

    @property
    def answer(self) -> GoldenAnswer | None:
        return self.answers[0] if self.answers else None


@dataclass(slots=True)  # as Call: a run's end holds one per pair of every test at once
class Score(Record):
    """A scorer's verdict on one candidate/reference pair: a value in [0, 1] and why."""

    scorer: str
    value: float
    explanation: str = ""
    threshold: float | None = None  # the pass band: at or above it, "equivalent"
    fail_below: float | None = None  # the fail band (calibrated): below it, "different"
    # "equivalent" | "different" | "undecided" (compare/bands.py); None: no verdict was asked for
    verdict: str | None = None
    decided_by: str | None = (
        None  # the evidence that decided: threshold, bands, structure, judge, review
    )
    # The evidence configured for a pair the score leaves undecided, cheapest first ("judge",
    # "review"): a pair decided before the judge saved its calls.
    then: list[str] = field(default_factory=list)
    replayed: bool = False  # decided by the judge's verdict cached in the golden file: no call
    # The measured error of the evidence behind the verdict (pass error when equivalent, fail error
    # when different) and its 95% upper bound: 0 for certain evidence (exact, structure, review),
    # None where nobody measured it (compare/decide.verdict_error).
    error: float | None = None
    error_upper: float | None = None
    # Why an undecided pair is undecided, with its fix (compare/policy.py): no evidence, the
    # judge not certified, outside the domain the bands were measured on, an empty golden answer.
    why_undecided: str | None = None

    @property
    def passed(self) -> bool | None:
        """True when equivalent, False when different, None when undecided or not judged."""
        if self.verdict is not None:
            return {"equivalent": True, "different": False}.get(self.verdict)
        return None if self.threshold is None else self.value >= self.threshold

    def as_dict(self) -> dict[str, JSON]:
        # super() with no arguments names the class before slots=True made a new one
        data = super(Score, self).as_dict()
        data["passed"] = self.passed
        return data


@dataclass(slots=True)
class Pair(Record):
    """A candidate call joined with the golden answer to the same canonical request."""

    call_index: int
    key: str
    golden_file: str
    reference_text: str | None
    reference_model: str | None = None
    reference_prompt_tokens: int | None = None
    reference_completion_tokens: int | None = None
    reference_e2e_ms: float | None = None
    reference_ttft_ms: float | None = None
    reference_cost_usd: float | None = None
    reference_tool_calls: list[dict[str, JSON]] | None = None
    missing: bool = False
    scores: list[Score] = field(default_factory=list)
    # The conversation left the reference's at this turn (1-based call position in the test): this
    # call's exact request had no golden answer and was compared with the reference's turn at its
    # own place, ``call_index + 1`` (golden/turns.py). None: the exact request was recorded.
    diverged_at: int | None = None

    NESTED = {"scores": Score}

    @property
    def equivalence(self) -> float | None:
        """Mean of the scorers' values; None when the golden was missing or nothing scored."""
        if self.missing or not self.scores:
            return None
        return sum(s.value for s in self.scores) / len(self.scores)

    @property
    def verdict(self) -> str | None:
        """The pair's verdict over its scores (one per choice): any "different" makes it
        different, else any "undecided" undecided, else "equivalent"; None when no score has one."""
        found = {s.verdict for s in self.scores if s.verdict is not None}
        if not found or self.missing:
            return None
        for verdict in ("different", "undecided"):
            if verdict in found:
                return verdict
        return "equivalent"


@dataclass(slots=True)
class Outcome(Record):
    """What one test run against one model produced: carried on the test report to the controller."""

    FIELDS: ClassVar[tuple[str, ...]] = ("nodeid", "test", "model", "outcome", "duration_s")

    nodeid: str
    test: str  # nodeid without the model parameter: the same test across models
    model: str
    # passed | failed | skipped | error | not_swapped | candidate_failed (run/test/outcomes.py)
    outcome: str = "passed"
    duration_s: float = 0.0
    calls: list[Call] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    budget_breaches: list[str] = field(default_factory=list)
    repeat: dict[str, JSON] | None = None  # --slm-repeat: {"runs": N, "passed": k, "rate": k/N}
    energy_j: float | None = None
    message: str | None = None
    egress: list[str] = field(default_factory=list)  # host:port sent off the machine (egress.py)
    # The test's slm_equivalence mark as plain data ({"by": ..., "at_least": ...}): what
    # `slam rescore` applies again; None without a mark (or one that is not plain data).
    equivalence: dict[str, JSON] | None = None
    # Failed by the swap's checks alone (a pair called different, a budget, a missing golden
    # answer): its own assertions passed, so `slam rescore` may pass it again with new bands.
    checks_failed: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, JSON]) -> Outcome:
        """Read as the report code always has: a call without ``role`` is the candidate's, and a
        hand-made or older call or pair may leave out what the report code never needed."""
        outcome = super(Outcome, cls).from_dict(data)  # named: see Score.as_dict
        calls = (_with(c, {"model": "", "role": "candidate", "request": {}}) for c in outcome.calls)
        outcome.calls = records(Call, calls)
        pair_defaults = {"call_index": -1, "key": "", "golden_file": "", "reference_text": None}
        outcome.pairs = records(Pair, (_with(p, dict(pair_defaults)) for p in outcome.pairs))
        return outcome

    def candidate_calls(self) -> list[Call]:
        """The calls the product made to the candidate (not the judge's, not passthrough)."""
        return [c for c in self.calls if c.role == "candidate"]


def _with(item: T | Mapping[str, JSON], defaults: dict[str, JSON]) -> T | Mapping[str, JSON]:
    """A dict with ``defaults`` under its missing keys; a record as it is."""
    return {**defaults, **item} if isinstance(item, Mapping) else item
