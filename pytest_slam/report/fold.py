"""The verdict built one outcome at a time: what ``aggregate`` computes, without every outcome held.

``aggregate`` sorts a run's outcomes and folds them here; ``slam report merge`` folds the shards'
outcomes as it reads them, one shard line at a time in canonical order, so both compute every
figure with the same code in the same order (a merged report is byte for byte the whole run's).
Each model's figures are computed from its own outcomes, model by model, so at most one model's
outcomes are records at once; with ``compact`` they wait as packed strings without the texts the
verdict never reads (the request, the answers, the explanations): about 0.5 KB an outcome instead
of a few KB of records (issue 53). What needs the texts (the note on similarity-only pairs) and
what spans the models (the reference row's golden answers) is taken as each outcome arrives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pytest_slam.records import JSON, Outcome, Pair
from pytest_slam.report import aggregate as agg
from pytest_slam.report.packed import pack, unpack

# Texts the verdict never reads, dropped from a compact fold's outcomes (its answers, requests).
_CALL_TEXTS: dict[str, JSON] = {
    "request": {},
    "text": "",
    "tool_calls": None,
    "logprobs": None,
    "other_choices": None,
    "usage_details": None,
}
_PAIR_TEXTS: dict[str, JSON] = {"reference_text": None, "reference_tool_calls": None}


def slim(outcome: Outcome, data: dict[str, JSON] | None = None) -> str:
    """The outcome as a packed string without the texts the verdict never reads; ``data``: its
    ``as_dict``, when the caller made it (changed here)."""
    data = outcome.as_dict() if data is None else data
    for call in data["calls"]:
        call.update(_CALL_TEXTS)
    for pair in data["pairs"]:
        pair.update(_PAIR_TEXTS)
        for score in pair["scores"]:
            score["explanation"] = ""
    return pack(data)


@dataclass
class _OpenEnded:
    """Pairs with similarity only (``weak_verdict_notes``): how many, their reference answers'
    lengths in words, and the scorers."""

    count: int = 0
    words: list[int] = field(default_factory=list)
    scorers: set[str] = field(default_factory=set)

    def add(self, pair: Pair) -> None:
        if agg.similarity_only(pair):
            self.count += 1
            self.words.append(len((pair.reference_text or "").split()))
            self.scorers.update(s.scorer for s in pair.scores)


class Fold:
    """Final outcomes (``final_outcomes``) added in canonical order; ``verdict`` is the verdict
    ``aggregate`` gives for them."""

    def __init__(self, compact: bool = False) -> None:
        self._compact = compact
        self._by_model: dict[str, list[Outcome | str]] = {}
        self._golden: dict[str, Pair] = {}  # the first pair with a golden answer, by key
        self._open = _OpenEnded()

    def add(self, outcome: Outcome, data: dict[str, JSON] | None = None) -> None:
        """The next final outcome; ``data``: its ``as_dict``, when the caller made it (a compact
        fold changes it)."""
        for pair in outcome.pairs:
            if not pair.missing and pair.key not in self._golden:
                self._golden[pair.key] = _golden_only(pair) if self._compact else pair
            self._open.add(pair)
        kept = slim(outcome, data) if self._compact else outcome
        self._by_model.setdefault(outcome.model, []).append(kept)

    def extend(self, outcomes: Iterable[Outcome]) -> Fold:
        for outcome in outcomes:
            self.add(outcome)
        return self

    def _outcomes(self, model: str) -> Iterator[Outcome]:
        strings: dict[str, str] = {}
        for kept in self._by_model.get(model, []):
            yield unpack(kept, strings) if isinstance(kept, str) else kept

    def verdict(self, run_info: agg.RunInfo) -> agg.Verdict:
        """The verdict, model by model: one model's outcomes are records at a time."""
        answers = [self._golden[k] for k in sorted(self._golden)]
        reference = agg.reference_row_of(answers, run_info.reference)
        ref_cost = reference.cost_per_call_usd if reference else None
        rows, tests = [], []
        equivalence: dict[str, dict[str, float]] = {}
        passes: dict[str, dict[str, float]] = {}
        for name in agg.model_order(self._by_model, run_info):
            outcomes = list(self._outcomes(name))
            rows.append(agg.model_row(name, outcomes, ref_cost))
            ran = [o for o in outcomes if o.outcome != agg.ENGINE]
            equivalence[name] = agg.request_equivalence(ran)
            passes[name] = agg.passes_by_test(ran)
            tests.extend(agg.per_test_rows(outcomes))
            if self._compact:  # this model's records go; the next model's are made
                del outcomes, ran
        agg.fill_comparisons(rows, equivalence, passes)
        return agg.Verdict(
            run=run_info,
            models=rows,
            reference=reference,
            tests=_test_order(tests),
            notes=agg.open_ended_notes(
                self._open.count, self._open.words, self._open.scorers, run_info
            ),
        )


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


def _test_order(rows: list[agg.PerTestRow]) -> list[agg.PerTestRow]:
    """Per-test rows in natural (test, model) order; each name's key made once."""
    keys: dict[str, tuple[tuple[str | int, ...], str]] = {}

    def key(name: str) -> tuple[tuple[str | int, ...], str]:
        found = keys.get(name)
        if found is None:
            found = keys[name] = agg.natural_key(name)
        return found

    return sorted(rows, key=lambda r: (key(r.test), key(r.model)))
