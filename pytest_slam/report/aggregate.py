"""Aggregate a run's outcomes into the per-model verdict a team reads to decide a model swap.

Input is the run's Outcome records (or their dicts, from a worker or a file), in any order: they
are sorted by nodeid first, so a serial run and an xdist run give the identical verdict.
Definitions (SCHEMA.md):

- Latency (TTFT, E2E, tokens/s) uses only candidate calls that succeeded, were measured live
  (not replayed) and were not cold starts; cold starts are counted apart.
- A pair's equivalence is the mean of its scorers' values; a model's mean and worst are over
  its scored pairs. Pairs with a missing golden answer are counted, never scored.
- The reference row comes from the pairs' ``reference_*`` fields, one per golden key: its
  latency is the one recorded with the golden answer, never measured in this run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Protocol, TypeVar

from pytest_slam.compare.named import describe_name
from pytest_slam.compare.uncertainty import Comparison, Interval
from pytest_slam.metrics.cost import cost_ratio, per_1000
from pytest_slam.metrics.latency import LATENCY_METRICS
from pytest_slam.metrics.stats import Summary, percentile, summarize
from pytest_slam.records import JSON, Call, ModelSpec, Outcome, Pair, Record, Score, records, spent
from pytest_slam.report.evidence import (
    EvidenceRow,
    evidence_rows,
    unmeasured_pairs,
    widened_interval,
)
from pytest_slam.report.foldspool import ModelSpools, outcome_of, pair_of, stripped
from pytest_slam.report.gate_result import GateResult
from pytest_slam.report.packed import PackedRun, slim_record, unpack

NOT_SWAPPED = "not_swapped"  # passed, but the candidate answered none of its calls (outcomes.py)
CANDIDATE_FAILED = "candidate_failed"  # passed, but a candidate call failed: a failed test
NO_CALLS = "no_calls"  # passed with no model call at all: counted apart (outcomes.py)
OUTCOME_SEVERITY = {
    "skipped": 0, NO_CALLS: 1, "passed": 2, NOT_SWAPPED: 3, CANDIDATE_FAILED: 4, "failed": 5,
    "error": 6,
}  # fmt: skip
CAUSES = (
    "likely causes: a client whose explicit base_url the swap does not redirect (list its host in "
    "[tool.slam] redirect_hosts), a mocked or monkeypatched client, or an API the swap does not "
    "carry"
)
FIXES = (
    "fix: let the product's call reach OPENAI_BASE_URL; mark a test that makes no model call "
    "@pytest.mark.slm(calls=0), or keep it on the original endpoint with "
    "@pytest.mark.slm(swap=False)"
)
ENGINE = "engine"  # the outcome of an engine's warm-up call: a cold start, not a product test
# A scored pair's four states, one word each on every surface (the eq/diff/und/none column, the
# JSON's pairs_* counts, the HTML): decided either way; "undecided", a verdict was asked for and
# its evidence could not give one (the gate fails on it); "no verdict", similarity only, none asked.
VERDICT_STATES = ("equivalent", "different", "undecided", "no verdict")
LONG_ANSWER_WORDS = 100  # median reference answer length above which they are (issue 12)


@dataclass
class RunInfo(Record):
    """How the run was made: models, reference, settings, times and what was assumed."""

    models: list[ModelSpec] = field(default_factory=list)
    reference: str = ""
    settings: dict[str, JSON] = field(default_factory=dict)
    started: str | None = None  # ISO 8601
    finished: str | None = None
    pytest_version: str = ""
    plugin_version: str = ""
    cost_assumption: str = ""
    gpu_telemetry: str = ""

    def __post_init__(self) -> None:
        self.models = [run_model(m) for m in self.models]

    @property
    def model_names(self) -> list[str]:
        return [m.name for m in self.models]


def run_model(spec: ModelSpec | Mapping[str, JSON]) -> ModelSpec:
    """A run's model as a record; an entry written by hand may name only the model."""
    if isinstance(spec, ModelSpec):
        return spec
    name = str(spec.get("name", ""))
    return ModelSpec.from_dict({"provider": "", "model_id": name, **spec})


@dataclass
class ModelRow(Record):
    """One model's line in the verdict; metric fields are ``<metric>_<unit>``."""

    model: str
    role: str = "candidate"  # "candidate" | "reference"
    tests_passed: int = 0
    tests_failed: int = 0
    tests_errored: int = 0
    tests_skipped: int = 0
    tests_not_swapped: int = 0  # no evidence either way: not in pass_rate; the gate fails on it
    tests_no_calls: int = 0  # made no model call at all (outcome no_calls): listed, not gated
    # passed their assertions with a candidate call that failed (outcome candidate_failed): in
    # tests_failed too; the gate fails on them. By the failed calls' error kind: kind -> tests
    tests_candidate_failed: int = 0
    candidate_failures: dict[str, int] = field(default_factory=dict)
    pass_rate: float | None = None
    calls: int = 0
    calls_errored: int = 0
    calls_runaway: int = 0  # of calls_errored: ran away at the structured cap (counted in latency)
    calls_replayed: int = 0
    latency_samples: int = 0
    pairs: int = 0
    missing_golden: int = 0
    equivalence_mean: float | None = None
    # the mean over every candidate call: a failed call (an error, a timeout, a runaway) counts 0,
    # so a model whose near misses became failures reads worse, not better (baseline, history)
    equivalence_all_calls: float | None = None
    equivalence_worst: float | None = None
    equivalence_by_scorer: dict[str, float] = field(default_factory=dict)
    # bootstrap 95% intervals over requests (equivalence) and tests (pass rate): uncertainty.py
    equivalence_mean_low: float | None = None
    equivalence_mean_high: float | None = None
    pass_rate_low: float | None = None
    pass_rate_high: float | None = None
    comparisons: list[Comparison] = field(default_factory=list)  # vs each other candidate
    # the LLM judge's own calls for this model's pairs (role "judge"): not the candidate's figures
    judge_calls: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_cost_usd: float | None = None  # total over the run
    judge_e2e_p50_ms: float | None = None
    unjudged: int = 0  # pairs the judge gave no readable verdict for, after a retry
    # the three outcomes (compare/bands.py), over scored pairs; no_verdict: similarity only reported
    pairs_equivalent: int = 0
    pairs_different: int = 0
    pairs_undecided: int = 0  # missing evidence: the gate fails on them unless allow_undecided
    pairs_no_verdict: int = 0
    # the cascade (then = ["judge"]): pairs the judge decided by a call made in this run, by a
    # verdict replayed from the golden file, and pairs decided before the judge (calls saved)
    judge_asked: int = 0
    judge_replayed: int = 0
    judge_saved: int = 0
    # of the pairs the judge answered: decided with a measured (certified) error, and left
    # undecided because its verdict on that side is not certified (compare/policy.py)
    judge_certified: int = 0
    judge_left_undecided: int = 0
    # undecided pairs by cause (compare/policy.Cause: no evidence, judge not certified, outside
    # the calibrated domain, no judge verdict, empty golden answer)
    undecided_causes: dict[str, int] = field(default_factory=dict)
    # how the decided pairs were decided, by evidence, each with its measured error (or
    # "unmeasured"); decided pairs resting on unmeasured evidence; the pass rate's interval widened
    # by the verdict errors of the pairs that decided its tests (report/evidence.py)
    verdict_evidence: list[EvidenceRow] = field(default_factory=list)
    pairs_unmeasured: int = 0
    pass_rate_verdict_low: float | None = None
    pass_rate_verdict_high: float | None = None
    # how many calls were in flight on the model when its measured calls were sent (Call.in_flight):
    # latency at 8 in flight is not latency at 1, so the report and a baseline say which it was
    in_flight_p50: float | None = None
    in_flight_max: int | None = None
    # the latency a user meets: the measured calls sent alone (Call.alone, swap/limits.py). Where
    # there are any, every latency figure of the row (what budgets, the gate and a baseline
    # read) is theirs, and the figures under the run's own load are kept beside them
    latency_alone: int = 0
    e2e_p50_loaded_ms: float | None = None
    e2e_p95_loaded_ms: float | None = None
    ttft_p50_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_std_ms: float | None = None
    e2e_cv: float | None = None
    output_tokens_per_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    cost_per_call_usd: float | None = None
    cost_per_1000_calls_usd: float | None = None
    cost_ratio: float | None = None
    energy_per_call_j: float | None = None
    energy_per_output_token_j: float | None = None
    cold_starts: int = 0
    distributions: dict[str, Summary] = field(default_factory=dict)  # by metric, measured only
    gate: str = "-"  # "PASS" | "FAIL" | "-" (no gate, or the reference)

    NESTED = {"verdict_evidence": EvidenceRow}

    @property
    def is_reference(self) -> bool:
        return self.role == "reference"

    @property
    def tests_run(self) -> int:
        return self.tests_passed + self.tests_failed + self.tests_errored

    def as_dict(self) -> dict[str, JSON]:
        data = super().as_dict()  # comparisons and distributions are not Records: written here
        data["comparisons"] = [c.as_dict() for c in self.comparisons]
        data["distributions"] = {k: v.as_dict() for k, v in self.distributions.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, JSON]) -> ModelRow:
        row = super().from_dict(data)
        row.comparisons = [comparison(c) for c in data.get("comparisons") or []]
        found = data.get("distributions") or {}
        row.distributions = {k: Summary.from_dict(v) for k, v in found.items()}
        return row


def comparison(data: Mapping[str, JSON]) -> Comparison:
    """A comparison as a report holds it; its ``text`` is derived (``describe``), so not read."""
    diff = Interval(**{k: data["diff"][k] for k in ("mean", "low", "high", "n", "level")})
    return Comparison(
        str(data["a"]), str(data["b"]), str(data["metric"]), diff, str(data["outcome"])
    )


@dataclass(slots=True)  # one per test of the run, all held by the verdict: no dict each
class PerTestRow(Record):
    """One test against one model: the unit a baseline compares and the HTML table lists."""

    test: str
    model: str
    outcome: str  # the worst of its runs: error > failed > passed > skipped
    runs: int = 1
    calls: int = 0
    calls_errored: int = 0
    missing_golden: int = 0
    equivalence_mean: float | None = None
    equivalence_all_calls: float | None = None  # a failed call counted 0 (ModelRow's)
    equivalence_worst: float | None = None
    e2e_p95_ms: float | None = None
    ttft_p50_ms: float | None = None
    cost_usd: float | None = None  # mean per call
    message: str | None = None
    egress: list[str] = field(default_factory=list)  # host:port its runs sent off the machine


@dataclass
class Verdict(Record):
    """The whole run's verdict: per-model rows, the reference row, per-test rows, the gate."""

    run: RunInfo
    models: list[ModelRow] = field(default_factory=list)
    reference: ModelRow | None = None
    tests: list[PerTestRow] = field(default_factory=list)
    gate: GateResult | None = None  # once a gate was applied
    notes: list[str] = field(default_factory=list)  # run-wide warnings (weak_verdict_notes)

    @property
    def rows(self) -> list[ModelRow]:
        """Candidates in run order, then the reference."""
        return self.models + ([self.reference] if self.reference else [])

    def row(self, model: str) -> ModelRow | None:
        return next((r for r in self.models if r.model == model), None)

    def as_dict(self) -> dict[str, JSON]:
        return {
            "run": self.run.as_dict(),
            "models": [r.as_dict() for r in self.models],
            "reference": self.reference.as_dict() if self.reference else None,
            "tests": [t.as_dict() for t in self.tests],
            "gate": self.gate.as_dict() if self.gate else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, JSON]) -> Verdict:
        ref, gate = data.get("reference"), data.get("gate")
        return cls(
            run=RunInfo.from_dict(data.get("run") or {}),
            models=[ModelRow.from_dict(r) for r in data.get("models") or []],
            reference=ModelRow.from_dict(ref) if ref else None,
            tests=[PerTestRow.from_dict(t) for t in data.get("tests") or []],
            gate=GateResult.from_dict(gate) if gate else None,
            notes=list(data.get("notes") or []),
        )


OutcomeLike = Outcome | Mapping[str, JSON]  # a record, or its dict from a worker or a file


def sort_outcomes(outcomes: Iterable[OutcomeLike]) -> list[Outcome]:
    """Canonical order: by nodeid, then repeat; the same for any worker interleaving."""
    return sorted(records(Outcome, outcomes), key=outcome_order)


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[str | int, ...], str]:
    """``test[103]`` before ``test[1039]`` before ``test[1046]``: runs of digits compare as
    numbers (a reader's order of parametrized ids), the text itself breaks ties (``07``, ``7``)."""
    parts = _DIGITS.split(text)  # text, digits, text, ...: the same type at each position
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text


def outcome_order(outcome: Outcome) -> tuple[tuple[tuple[str | int, ...], str], int, str]:
    """Nodeid, then repeat runs, then phase outcome: one test can report a call and a teardown."""
    repeat = outcome.repeat or {}
    return (natural_key(outcome.nodeid), int(repeat.get("runs", 0)), outcome.outcome)


def aggregate(outcomes: Iterable[OutcomeLike], run_info: RunInfo) -> Verdict:
    """Build the verdict from a run's outcomes (records or their dicts), in any order.

    A run's packed outcomes (``PackedRun``, the end of a run) are read one at a time in canonical
    order and folded as they come: the fold keeps each one's packed string, not its record, and
    the verdict reads a model's back without their texts (``Fold(packed=True)``)."""
    if isinstance(outcomes, PackedRun):
        fold = Fold(packed=True)
        for outcome, kept in final_items(outcomes.ordered_items(outcome_order), itemgetter(0)):
            fold.add_packed(outcome, kept)
        return fold.verdict(run_info)
    return Fold().extend(final_outcomes(sort_outcomes(outcomes))).verdict(run_info)


def in_order(outcomes: Iterable[OutcomeLike]) -> Iterator[Outcome]:
    """``sort_outcomes``, one record at a time where the outcomes are packed (``PackedRun``)."""
    if isinstance(outcomes, PackedRun):
        return outcomes.ordered(outcome_order)
    return iter(sort_outcomes(outcomes))


HOW_TO_DECIDE = (
    "to get a verdict: calibrate bands from labelled pairs (`slam calibrate`), set at_least "
    'yourself, configure a judge ([tool.slam] judge, then = ["judge"]) or review the pairs '
    "(`slam review`)"
)


def weak_verdict_notes(outcomes: list[Outcome], run_info: RunInfo) -> list[str]:
    """One note, once per run, when similarity was reported but nothing decided a pair.

    Uncalibrated similarity is no verdict: on open-ended answers fuzzy and semantic scores agree
    poorly with graded quality (kappa 0.03-0.19 against a judge, bench/README.md). Such a pair is
    neither equivalent nor different; the note says how to get a verdict, and on long answers why.
    """
    open_ended = [p for o in outcomes for p in o.pairs if similarity_only(p)]
    words = [len((p.reference_text or "").split()) for p in open_ended]
    scorers = {s.scorer for p in open_ended for s in p.scores}
    return open_ended_notes(len(open_ended), words, scorers, run_info)


def open_ended_notes(
    count: int, words: list[int], scorers: set[str], run_info: RunInfo
) -> list[str]:
    """The note of ``weak_verdict_notes`` from its parts: the similarity-only pairs' count, their
    reference answers' lengths in words and their scorers (``Fold`` folds them)."""
    from statistics import median

    if not count:
        return []
    middle = median(words)
    named = " and ".join(sorted(scorers))
    long = (
        f" (median reference answer {middle:.0f} words: on long open-ended answers similarity "
        "agrees poorly with graded quality, bench/README.md)"
        if middle > LONG_ANSWER_WORDS and int(run_info.settings.get("samples") or 1) <= 1
        else ""
    )
    return [
        f"no verdict: {count} pair(s) have {named} similarity only, reported with its "
        f"interval; none is called equivalent or different{long}; {HOW_TO_DECIDE}"
    ]


def similarity_only(pair: Pair) -> bool:
    """A scored pair whose every score is similarity with no verdict asked for."""
    if pair.missing or pair.reference_text is None or not pair.scores:
        return False
    return all(
        s.verdict is None and s.threshold is None and not describe_name(s.scorer).decides_alone
        for s in pair.scores
    )


T = TypeVar("T")


def _itself(outcome: Outcome) -> Outcome:
    return outcome


def final_outcomes(ordered: list[Outcome]) -> list[Outcome]:
    """One outcome per nodeid, the worst: a report that lists a test's call and its teardown
    error counts the test once (the session already keeps only a rerun test's last attempt)."""
    return list(final_stream(ordered))


def final_stream(ordered: Iterable[Outcome]) -> Iterator[Outcome]:
    """``final_outcomes`` of outcomes in canonical order, one at a time: a nodeid's outcomes are
    next to each other there, the first of the worst kept."""
    return final_items(ordered, _itself)


class Phase(Protocol):
    """What ``final_items`` reads of an outcome: an Outcome, or the merge's line read."""

    @property
    def nodeid(self) -> str: ...
    @property
    def outcome(self) -> str: ...


def final_items(ordered: Iterable[T], record: Callable[[T], Phase]) -> Iterator[T]:
    """``final_stream`` of items that each hold an outcome (``record`` gives it, or what this
    reads of it): the merge streams each outcome's line with its JSON value."""
    kept: T | None = None
    kept_record: Phase | None = None
    for item in ordered:
        outcome = record(item)
        if kept_record is not None and outcome.nodeid != kept_record.nodeid:
            yield kept  # type: ignore[misc]
            kept = kept_record = None
        if kept_record is None or _severity(outcome) > _severity(kept_record):
            kept, kept_record = item, outcome
    if kept_record is not None:
        yield kept  # type: ignore[misc]


def _severity(outcome: Phase) -> int:
    return OUTCOME_SEVERITY.get(outcome.outcome, len(OUTCOME_SEVERITY))


def model_order(models: Iterable[str], run_info: RunInfo) -> list[str]:
    """The run's models in its order, then any other model an outcome names, by name."""
    named = run_info.model_names
    extra = sorted(set(models) - set(named))
    return named + extra


Units = tuple[dict[str, float], dict[str, float]]  # ``request_equivalence``, ``passes_by_test``


def model_row(
    model: str, outcomes: list[Outcome], ref_cost: float | None, units: Units | None = None
) -> ModelRow:
    """One candidate's row from its (sorted) outcomes.

    An engine's warm-up call counts as a cold start only: the product never made it, so its
    tokens and its (load-inflated) self-hosted cost stay out of the per-call figures. ``units``:
    the per-unit values of its tests (engines' left out), when the caller made them already.
    """
    row = ModelRow(model=model)
    tests = [o for o in outcomes if o.outcome != ENGINE]
    _count_tests(row, tests)
    _count_candidate_failures(row, tests)
    calls = [c for o in tests for c in o.candidate_calls()]
    _count_calls(row, calls)
    row.cold_starts = sum(1 for o in outcomes for c in o.candidate_calls() if c.cold_start)
    _fill_equivalence(row, [p for o in tests for p in o.pairs])
    row.equivalence_all_calls = all_calls_mean(
        row.equivalence_mean, _valued(tests), row.calls_errored
    )
    _fill_verdicts(row, [p for o in tests for p in o.pairs])
    _fill_intervals(row, tests, units)
    _fill_judge(row, [c for o in tests for c in o.calls if c.role == "judge"])
    _fill_latency(row, calls)
    _fill_tokens(row, calls)
    _fill_cost(row, calls, _paired_costs(tests))
    _fill_energy(row, calls)
    return row


def latency_calls(calls: list[Call]) -> list[Call]:
    """Calls whose timings measure the model: succeeded or ran away, live (not replayed), not cold.

    The ``ok`` bucket of metrics.latency: a replayed call's timings are not this run's, a cold
    start carries load time, an errored call measures how long a failure took. A runaway
    (``records.spent``) generated until the cap stopped it: at least the time it ran counts, or a
    model whose calls all ran away would show no latency at all.
    """
    return [c for c in calls if not c.replayed and spent(c) and not c.cold_start]


def _count_tests(row: ModelRow, outcomes: list[Outcome]) -> None:
    kinds = [o.outcome for o in outcomes]
    row.tests_passed = kinds.count("passed")
    row.tests_failed = kinds.count("failed") + kinds.count(CANDIDATE_FAILED)
    row.tests_errored = kinds.count("error")
    row.tests_skipped = kinds.count("skipped")
    row.tests_not_swapped = kinds.count(NOT_SWAPPED)
    row.tests_no_calls = kinds.count(NO_CALLS)
    row.pass_rate = row.tests_passed / row.tests_run if row.tests_run else None


def _count_candidate_failures(row: ModelRow, outcomes: list[Outcome]) -> None:
    """Tests whose candidate failed a call the product swallowed: in all, and per error kind."""
    kinds: dict[str, int] = {}
    for outcome in outcomes:
        if outcome.outcome == CANDIDATE_FAILED:
            row.tests_candidate_failed += 1
            for kind in {c.error_kind or "error" for c in outcome.candidate_calls() if not c.ok}:
                kinds[kind] = kinds.get(kind, 0) + 1
    row.candidate_failures = dict(sorted(kinds.items()))


def _count_calls(row: ModelRow, calls: list[Call]) -> None:
    row.calls = len(calls)
    row.calls_errored = sum(1 for c in calls if c.error is not None)
    row.calls_runaway = sum(1 for c in calls if c.error_kind == "runaway")
    row.calls_replayed = sum(1 for c in calls if c.replayed)


def _fill_equivalence(row: ModelRow, pairs: list[Pair]) -> None:
    row.pairs = len(pairs)
    row.missing_golden = sum(1 for p in pairs if p.missing)
    values = [v for v in (p.equivalence for p in pairs) if v is not None]
    row.equivalence_mean = _mean(values)
    row.equivalence_worst = min(values) if values else None
    by_scorer: dict[str, list[float]] = {}
    for pair in pairs:
        for score in [] if pair.missing else pair.scores:
            by_scorer.setdefault(score.scorer, []).append(score.value)
    row.equivalence_by_scorer = {k: sum(v) / len(v) for k, v in sorted(by_scorer.items())}


def _valued(outcomes: list[Outcome]) -> int:
    return sum(1 for o in outcomes for p in o.pairs if p.equivalence is not None)


def all_calls_mean(mean: float | None, valued: int, failed: int) -> float | None:
    """The mean equivalence with each failed candidate call counted 0: a failed call gave no
    answer a user could use, so leaving it out would read a run of runaways as a gain."""
    if valued + failed == 0:
        return None
    return (mean or 0.0) * valued / (valued + failed)


CHEAP = ("exact", "threshold", "bands", "structure")  # evidence that decides before the judge


def _fill_verdicts(row: ModelRow, pairs: list[Pair]) -> None:
    """How many pairs are equivalent, different, undecided or have no verdict; what the judge
    decided (asked now or replayed) and what was decided before it."""
    scored = [p for p in pairs if not p.missing and p.scores]
    _count_verdicts(row, scored)
    _count_judged(row, scored)
    row.verdict_evidence = evidence_rows(scored)
    row.pairs_unmeasured = unmeasured_pairs(row.verdict_evidence)


def _count_verdicts(row: ModelRow, scored: list[Pair]) -> None:
    """The scored pairs by verdict, and the undecided ones by cause (compare/policy.Cause)."""
    from pytest_slam.compare.policy import cause_of

    verdicts = [p.verdict for p in scored]
    row.pairs_equivalent = verdicts.count("equivalent")
    row.pairs_different = verdicts.count("different")
    row.pairs_undecided = verdicts.count("undecided")
    row.pairs_no_verdict = verdicts.count(None)
    causes = [
        cause_of(s.why_undecided).value
        for p in scored
        for s in p.scores
        if s.verdict == "undecided"
    ]
    row.undecided_causes = {c: causes.count(c) for c in dict.fromkeys(causes)}


def _count_judged(row: ModelRow, scored: list[Pair]) -> None:
    """The pairs the judge decided (certified or not, asked now or replayed) and the pairs the
    cheap evidence decided before a cascade's judge was needed (``_judge_saved``)."""
    left = [p for p in scored if any(_uncertified(s) for s in p.scores)]
    judged = [p for p in scored if any(s.decided_by == "judge" for s in p.scores)]
    row.judge_certified = sum(1 for p in judged if all(s.error_upper is not None for s in p.scores))
    row.judge_left_undecided = len(left)
    judged += left
    row.judge_replayed = sum(1 for p in judged if all(s.replayed for s in p.scores))
    row.judge_asked = len(judged) - row.judge_replayed
    row.judge_saved = _judge_saved(scored)


def _judge_saved(scored: list[Pair]) -> int:
    """Pairs whose cascade names the judge but that cheap evidence decided first."""
    return sum(
        1 for p in scored if all(s.decided_by in CHEAP and "judge" in s.then for s in p.scores)
    )


def _uncertified(score: Score) -> bool:
    """The judge answered, and its verdict on that side is not certified: left undecided."""
    from pytest_slam.compare.policy import Cause, cause_of

    return (
        score.verdict == "undecided" and cause_of(score.why_undecided) is Cause.JUDGE_NOT_CERTIFIED
    )


def request_equivalence(outcomes: list[Outcome]) -> dict[str, float]:
    """Equivalence per request (golden key), averaged over its pairs: the bootstrap's unit."""
    from pytest_slam.compare.uncertainty import per_unit

    return per_unit((p.key, p.equivalence) for o in outcomes for p in o.pairs)


def passes_by_test(outcomes: list[Outcome]) -> dict[str, float]:
    """1.0 or 0.0 per test that ran (skips left out), averaged over its runs."""
    from pytest_slam.compare.uncertainty import per_unit

    ran = [o for o in outcomes if o.outcome in ("passed", "failed", "error", CANDIDATE_FAILED)]
    return per_unit((o.test, float(o.outcome == "passed")) for o in ran)


def _fill_intervals(row: ModelRow, outcomes: list[Outcome], units: Units | None = None) -> None:
    from pytest_slam.compare.uncertainty import mean_interval

    if units is None:
        units = request_equivalence(outcomes), passes_by_test(outcomes)
    equiv = mean_interval(units[0])
    passes = mean_interval(units[1])
    if equiv is not None:
        row.equivalence_mean_low, row.equivalence_mean_high = equiv.low, equiv.high
    if passes is not None:
        row.pass_rate_low, row.pass_rate_high = passes.low, passes.high
    low, high = widened_interval(row.pass_rate_low, row.pass_rate_high, outcomes)
    row.pass_rate_verdict_low, row.pass_rate_verdict_high = low, high


def _fill_judge(row: ModelRow, calls: list[Call]) -> None:
    """The judge's calls: how many, tokens, total cost, median latency, and unjudged pairs."""
    row.judge_calls = len(calls)
    row.judge_prompt_tokens = sum(c.prompt_tokens or 0 for c in calls)
    row.judge_completion_tokens = sum(c.completion_tokens or 0 for c in calls)
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    row.judge_cost_usd = sum(costs) if costs else None
    row.judge_e2e_p50_ms = _percentile([c.e2e_ms for c in calls], 50)
    row.unjudged = sum(1 for c in calls if c.error_kind == "unjudged")


def fill_comparisons(
    rows: list[ModelRow],
    equivalence: Mapping[str, Mapping[str, float]],
    passes: Mapping[str, Mapping[str, float]],
) -> None:
    """Each candidate against every other, paired on the requests and tests both ran: by model,
    ``request_equivalence`` and ``passes_by_test`` of its outcomes (engines' left out)."""
    from pytest_slam.compare.uncertainty import compare_all, mirrored

    found = compare_all({r.model: equivalence.get(r.model, {}) for r in rows}, "equivalence")
    found += compare_all({r.model: passes.get(r.model, {}) for r in rows}, "pass rate")
    for row in rows:  # each pair is bootstrapped once and shown from both sides
        row.comparisons = [c for c in found if c.a == row.model]
        row.comparisons += [mirrored(c) for c in found if c.b == row.model]


def _fill_latency(row: ModelRow, calls: list[Call], derived: bool = True) -> None:
    """Latency of the measured calls (``latency_calls``); ``derived=False`` for recorded golden
    answers, which have TTFT and E2E but no per-token figures of this run."""
    measured = latency_calls(calls)
    alone = [c for c in measured if c.alone]
    if alone:  # the figures a user meets; the run's own load beside them
        loaded = [c.e2e_ms for c in measured if not c.alone]
        row.latency_alone = len(alone)
        row.e2e_p50_loaded_ms = _percentile(loaded, 50)
        row.e2e_p95_loaded_ms = _percentile(loaded, 95)
    sample = alone or measured
    metrics = LATENCY_METRICS if derived else ("ttft_ms", "e2e_ms")
    found = {m: summarize(_metric(c, m) for c in sample) for m in metrics}
    row.distributions = {k: v for k, v in found.items() if v.count}
    ttft, e2e = found["ttft_ms"], found["e2e_ms"]
    row.latency_samples = e2e.count  # a curated reference answer has no timing to count
    row.ttft_p50_ms = ttft.p50
    row.e2e_p50_ms, row.e2e_p95_ms = e2e.p50, e2e.p95
    row.e2e_std_ms, row.e2e_cv = e2e.std, e2e.cv
    row.output_tokens_per_s = _throughput(sample)
    counts = [c.in_flight for c in measured if c.in_flight is not None and not c.alone]
    row.in_flight_p50 = _percentile(counts, 50)
    row.in_flight_max = max(counts) if counts else None


def _metric(call: Call, name: str) -> float | None:
    value: float | None = getattr(call, name)
    return value


def _throughput(measured: list[Call]) -> float | None:
    """Output tokens over the seconds of the calls that timed them: tokens/s, call-weighted."""
    timed = [(c.e2e_ms, c.completion_tokens) for c in measured if c.e2e_ms and c.completion_tokens]
    seconds = sum(e2e for e2e, _ in timed) / 1000.0
    return sum(tokens for _, tokens in timed) / seconds if seconds > 0 else None


def _percentile(values: Iterable[float | None], q: float) -> float | None:
    """One linear percentile (metrics.stats) of the measured values; None when there are none."""
    data = sorted(float(v) for v in values if v is not None)
    return percentile(data, q) if data else None


def _fill_tokens(row: ModelRow, calls: list[Call]) -> None:
    row.prompt_tokens = sum(c.prompt_tokens or 0 for c in calls)
    row.completion_tokens = sum(c.completion_tokens or 0 for c in calls)
    row.tokens_estimated = any(c.tokens_estimated for c in calls)


def _paired_costs(outcomes: list[Outcome]) -> list[tuple[float, float]]:
    """(candidate cost, reference cost) for every request both sides priced."""
    out = []
    for outcome in outcomes:
        calls = outcome.calls
        for pair in outcome.pairs:
            index, ref = pair.call_index, pair.reference_cost_usd
            cand = calls[index].cost_usd if 0 <= index < len(calls) else None
            if not pair.missing and cand is not None and ref is not None:
                out.append((cand, ref))
    return out


def _fill_cost(row: ModelRow, calls: list[Call], paired: list[tuple[float, float]]) -> None:
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    row.cost_per_call_usd = _mean(costs)
    row.cost_per_1000_calls_usd = per_1000(row.cost_per_call_usd)
    row.cost_ratio = cost_ratio([c for c, _ in paired], [r for _, r in paired])


def _fill_energy(row: ModelRow, calls: list[Call]) -> None:
    measured = [(c.energy_j, c.completion_tokens) for c in calls if c.energy_j is not None]
    row.energy_per_call_j = _mean([e for e, _ in measured])
    with_tokens = [(e, t) for e, t in measured if t]
    tokens = sum(t for _, t in with_tokens)
    if tokens:
        row.energy_per_output_token_j = sum(e for e, _ in with_tokens) / tokens


def reference_row(outcomes: list[Outcome], name: str) -> ModelRow | None:
    """The reference as recorded with its golden answers: one sample per golden key."""
    return reference_row_of(golden_pairs(outcomes), name)


def reference_row_of(answers: list[Pair], name: str) -> ModelRow | None:
    """``reference_row`` from its golden pairs (``golden_pairs``), in key order."""
    if not answers and not name:
        return None
    model = name or next((p.reference_model for p in answers if p.reference_model), "")
    row = ModelRow(model=model or "reference", role="reference", calls=len(answers))
    calls = [_as_call(p) for p in answers]
    _fill_latency(row, calls, derived=False)
    _fill_tokens(row, calls)
    _fill_cost(row, calls, [])
    row.cost_ratio = 1.0 if row.cost_per_call_usd else None
    return row


def golden_pairs(outcomes: list[Outcome]) -> list[Pair]:
    """The first pair with a golden answer per golden key, in key order."""
    seen: dict[str, Pair] = {}
    for outcome in outcomes:
        for pair in outcome.pairs:
            if not pair.missing:
                seen.setdefault(pair.key, pair)
    return [seen[k] for k in sorted(seen)]


def _as_call(pair: Pair) -> Call:
    """A golden answer seen as a call, so the reference row uses the same arithmetic."""
    return Call(
        model=pair.reference_model or "",
        role="reference",
        request={},
        ttft_ms=pair.reference_ttft_ms,
        e2e_ms=pair.reference_e2e_ms,
        prompt_tokens=pair.reference_prompt_tokens,
        completion_tokens=pair.reference_completion_tokens,
        cost_usd=pair.reference_cost_usd,
    )


def per_test_rows(outcomes: Iterable[OutcomeLike]) -> list[PerTestRow]:
    """Per (test, model) rows in natural (test, model) order; repeats of a test fold into one row."""
    return _test_order(test_rows(outcomes))


def test_rows(outcomes: Iterable[OutcomeLike]) -> list[PerTestRow]:
    """``per_test_rows`` in the order their tests first come (``Fold.verdict`` orders every
    model's at once: a natural key made twice a row was a tenth of a merge's verdict)."""
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for outcome in records(Outcome, outcomes):
        if outcome.outcome != ENGINE:
            groups.setdefault((outcome.test, outcome.model), []).append(outcome)
    return [_test_row(test, model, runs) for (test, model), runs in groups.items()]


def _test_row(test: str, model: str, runs: list[Outcome]) -> PerTestRow:
    """One row: only the figures it shows (no full distributions: this runs per test)."""
    worst = max(runs, key=_severity)
    pairs = [p for o in runs for p in o.pairs]
    calls = [c for o in runs for c in o.candidate_calls()]
    values = [v for v in (p.equivalence for p in pairs) if v is not None]
    measured = latency_calls(calls)
    failed = sum(1 for c in calls if c.error is not None)
    return PerTestRow(
        test=test,
        model=model,
        outcome=worst.outcome,
        runs=len(runs),
        calls=len(calls),
        calls_errored=failed,
        missing_golden=sum(1 for p in pairs if p.missing),
        equivalence_mean=_mean(values),
        equivalence_all_calls=all_calls_mean(_mean(values), len(values), failed),
        equivalence_worst=min(values) if values else None,
        e2e_p95_ms=_percentile([c.e2e_ms for c in measured], 95),
        ttft_p50_ms=_percentile([c.ttft_ms for c in measured], 50),
        cost_usd=_mean([c.cost_usd for c in calls if c.cost_usd is not None]),
        message=worst.message,
        egress=[e for o in runs for e in o.egress],
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# The verdict built one outcome at a time: what ``aggregate`` computes, without every outcome held.
# ``aggregate`` sorts a run's outcomes and folds them here; ``slam report merge`` folds the shards'
# outcomes as it reads them, one shard line at a time in canonical order, so both compute every
# figure with the same code in the same order (a merged report is byte for byte the whole run's).
# Each model's figures are computed from its own outcomes, model by model, so at most one model's
# outcomes are records at once; with ``compact`` they wait in a temporary file a model, without the
# texts the verdict never reads (the request, the answers, the explanations: ``foldspool``), not
# in memory (issue 53). What needs the texts (the note on similarity-only pairs) and what spans
# the models (the reference row's golden answers) is taken as each outcome arrives.


@dataclass
class _OpenEnded:
    """Pairs with similarity only (``weak_verdict_notes``): how many, their reference answers'
    lengths in words, and the scorers."""

    count: int = 0
    words: list[int] = field(default_factory=list)
    scorers: set[str] = field(default_factory=set)

    def add(self, pair: Pair) -> None:
        if similarity_only(pair):
            self.count += 1
            self.words.append(len((pair.reference_text or "").split()))
            self.scorers.update(s.scorer for s in pair.scores)


_NAMELESS: dict[str, JSON] = {"nodeid": "", "test": "", "model": ""}  # a record of pairs alone


def _maybe_open(pair: Mapping[str, JSON]) -> bool:
    """Whether a pair's JSON value may be similarity only (``similarity_only``): scored, with a
    reference answer, and no score asking for a verdict. Only such a pair is made a record."""
    scores = pair.get("scores")
    if pair.get("missing") or pair.get("reference_text") is None or not scores:
        return False
    return not any(
        isinstance(s, Mapping) and (s.get("verdict") is not None or s.get("threshold") is not None)
        for s in scores
    )


class Fold:
    """Final outcomes (``final_outcomes``) added in canonical order; ``verdict`` is the verdict
    ``aggregate`` gives for them."""

    def __init__(self, compact: bool = False, packed: bool = False) -> None:
        self._compact = compact or packed
        self._by_model: dict[str, list[Outcome]] = {}
        self._spools = ModelSpools() if compact else None
        # packed: each model's outcomes as the run keeps them (``add_packed``), not as records
        self._packed: dict[str, list[str | Outcome]] | None = {} if packed else None
        self._golden: dict[str, Pair] = {}  # the first pair with a golden answer, by key
        self._open = _OpenEnded()

    def add(self, outcome: Outcome) -> None:
        """The next final outcome (a compact fold keeps its value, not the record)."""
        if self._spools is not None:
            self.add_value(slim_record(outcome))
            return
        self._pairs(outcome.pairs)
        self._by_model.setdefault(outcome.model, []).append(outcome)

    def add_packed(self, outcome: Outcome, kept: str | Outcome) -> None:
        """The next final outcome of a packed run: ``kept`` (its packed string, or the record)
        waits by model; ``outcome`` (its record) is read now and let go."""
        assert self._packed is not None  # Fold(packed=True)
        self._pairs(outcome.pairs)
        self._by_model.setdefault(outcome.model, [])
        self._packed.setdefault(outcome.model, []).append(kept)

    def add_value(self, data: dict[str, JSON], packed: bytes | None = None) -> None:
        """The next final outcome as its JSON value (a report line's, its defaults left out; it is
        changed here): no record is made of it until the verdict (a compact fold's file).
        ``packed``: its ``stripped`` value as ``marshal`` bytes, made already (by the merge's
        worker that checked its shard): then ``data`` need hold only its model and pairs."""
        model = str(data["model"])
        for pair in data.get("pairs") or ():
            if not isinstance(pair, dict):  # read as ``Outcome.from_dict`` reads it
                self._pairs(Outcome.from_dict({**_NAMELESS, "pairs": [pair]}).pairs)
            elif self._read(pair):
                self._pairs([pair_of(pair)])
        if self._spools is None:
            self._by_model.setdefault(model, []).append(outcome_of(data))
        else:
            self._by_model.setdefault(model, [])
            if packed is None:
                self._spools.add(model, stripped(data))
            else:
                self._spools.add_packed(model, packed)

    def _read(self, pair: Mapping[str, JSON]) -> bool:
        """Whether ``_pairs`` reads anything of a pair's JSON value: the first golden answer of
        its key, or a pair that may be similarity only. Only those are made records."""
        if not pair.get("missing") and pair.get("key", "") not in self._golden:
            return True
        return _maybe_open(pair)

    def _pairs(self, pairs: Iterable[Pair]) -> None:
        for pair in pairs:
            if not pair.missing and pair.key not in self._golden:
                self._golden[pair.key] = _golden_only(pair) if self._compact else pair
            self._open.add(pair)

    def extend(self, outcomes: Iterable[Outcome]) -> Fold:
        for outcome in outcomes:
            self.add(outcome)
        return self

    def _outcomes(self, model: str) -> Iterator[Outcome]:
        """The model's outcomes, given up by the fold as they are read (``verdict`` reads each
        model's once)."""
        held = self._by_model.pop(model, [])
        if self._spools is not None:
            return self._spools.take(model)
        if self._packed is not None:
            return (_light(kept) for kept in self._packed.pop(model, []))
        return iter(held)

    def verdict(self, run_info: RunInfo) -> Verdict:
        """The verdict, model by model: one model's outcomes are records at a time (once: the
        fold is emptied as it is read)."""
        answers = [self._golden[k] for k in sorted(self._golden)]
        reference = reference_row_of(answers, run_info.reference)
        ref_cost = reference.cost_per_call_usd if reference else None
        if self._compact:  # a golden answer a key, read: gone before the models' records come
            del answers
            self._golden.clear()
        rows, tests = [], []
        equivalence: dict[str, dict[str, float]] = {}
        passes: dict[str, dict[str, float]] = {}
        for name in model_order(list(self._by_model), run_info):
            outcomes = list(self._outcomes(name))
            ran = [o for o in outcomes if o.outcome != ENGINE]
            equivalence[name] = request_equivalence(ran)
            passes[name] = passes_by_test(ran)
            rows.append(model_row(name, outcomes, ref_cost, (equivalence[name], passes[name])))
            tests.extend(test_rows(outcomes))
            if self._compact:  # this model's records go; the next model's are made
                del outcomes, ran
        fill_comparisons(rows, equivalence, passes)
        return Verdict(
            run=run_info,
            models=rows,
            reference=reference,
            tests=_test_order(tests),
            notes=open_ended_notes(
                self._open.count, self._open.words, self._open.scorers, run_info
            ),
        )


def _light(kept: str | Outcome) -> Outcome:
    """A packed outcome as the verdict reads it: the record ``outcome_of`` makes of its report
    value without the texts (``foldspool.stripped``), as a compact fold's file gives it back."""
    record = unpack(kept) if isinstance(kept, str) else kept
    return outcome_of(stripped(slim_record(record)))


def _golden_only(pair: Pair) -> Pair:
    """What the reference row reads of a pair: its golden answer's figures, not its texts."""
    return Pair(
        call_index=pair.call_index,
        key=pair.key,
        golden_file="",
        reference_text=None,
        reference_model=pair.reference_model,
        reference_prompt_tokens=pair.reference_prompt_tokens,
        reference_completion_tokens=pair.reference_completion_tokens,
        reference_e2e_ms=pair.reference_e2e_ms,
        reference_ttft_ms=pair.reference_ttft_ms,
        reference_cost_usd=pair.reference_cost_usd,
    )


def _test_order(rows: list[PerTestRow]) -> list[PerTestRow]:
    """Per-test rows in natural (test, model) order; each name's key made once."""
    keys: dict[str, tuple[tuple[str | int, ...], str]] = {}

    def key(name: str) -> tuple[tuple[str | int, ...], str]:
        found = keys.get(name)
        if found is None:
            found = keys[name] = natural_key(name)
        return found

    return sorted(rows, key=lambda r: (key(r.test), key(r.model)))
