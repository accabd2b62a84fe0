"""After an opted-in test: pair each candidate call with its golden answer, price it, score it, and
check the budgets. The result is a list of problems (the test fails with them) and the Pairs the report
shows. The test's own assertions already ran; these add what the swap knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from .golden.fileformat import GoldenError
from .metering import measure
from .records import Call, GoldenRecord, Pair
from .reference import MissingGolden, ReferenceFailed, ReferenceService
from .swap import TestContext

EQUIVALENCE_MARK = "slm_equivalence"
BUDGET_MARK = "slm_budget"


@dataclass
class TestVerdict:
    __test__ = False

    pairs: list[Pair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    breaches: list[str] = field(default_factory=list)


@dataclass
class Checker:
    """Everything one test process needs to judge a finished test."""

    reference: ReferenceService | None
    equivalence: dict[str, Any]
    prices: Any  # metrics.cost.Prices
    judge_complete: Any = None  # callable(messages) -> str, when a judge model is configured

    def run(self, item: pytest.Item, ctx: TestContext, failed: bool) -> TestVerdict:
        verdict = TestVerdict()
        for call in ctx.calls:
            measure(ctx.model, call, self.prices)
        if self.reference is not None and _wants_reference(item):
            for index, call in enumerate(ctx.calls):
                if call.ok:
                    self._pair(item, ctx, index, call, verdict, failed)
        self._score(item, ctx, verdict)
        self._budget(item, ctx, verdict)
        return verdict

    def _pair(self, item: pytest.Item, ctx: TestContext, index: int, call: Call,
              verdict: TestVerdict, failed: bool) -> None:  # fmt: skip
        assert self.reference is not None
        store = self.reference.store
        try:
            rec = self.reference.answer(ctx.module, ctx.test, call.request, ctx.test)
        except (MissingGolden, GoldenError, ReferenceFailed) as exc:
            key = _key(call)
            verdict.pairs.append(Pair(index, key, str(store.path_for(ctx.module)), None, missing=True))
            if not failed:
                verdict.problems.append(f"call {index + 1}: {exc}")
            return
        call.key = rec.key
        verdict.pairs.append(self._make_pair(index, rec, str(store.path_for(ctx.module))))

    def _make_pair(self, index: int, rec: GoldenRecord, path: str) -> Pair:
        from .metrics.cost import api_call_cost

        ans = rec.answers[0]
        model = ans.model or (self.reference.spec.model_id if self.reference else None)
        return Pair(
            call_index=index, key=rec.key, golden_file=path, reference_text=ans.text,
            reference_model=model, reference_prompt_tokens=ans.prompt_tokens,
            reference_completion_tokens=ans.completion_tokens, reference_e2e_ms=ans.e2e_ms,
            reference_ttft_ms=ans.ttft_ms,
            reference_cost_usd=api_call_cost(
                model or "", ans.prompt_tokens, ans.completion_tokens, self.prices
            ),
        )  # fmt: skip

    def _score(self, item: pytest.Item, ctx: TestContext, verdict: TestVerdict) -> None:
        from .compare.assertion import evaluate
        from .compare.base import ScorerError

        by, at_least, options = self.scoring_for(item)
        for pair in verdict.pairs:
            if pair.reference_text is None:
                continue
            call = ctx.calls[pair.call_index]
            try:
                score = evaluate(call.text, pair.reference_text, by, at_least, **options)
            except (ScorerError, ValueError) as exc:
                verdict.problems.append(f"call {pair.call_index + 1}: scorer {by!r}: {exc}")
                continue
            pair.scores.append(score.as_dict())
            if score.passed is False:
                verdict.problems.append(
                    f"call {pair.call_index + 1}: equivalence {score.value:.2f} < {at_least:.2f} "
                    f"({score.scorer}): {score.explanation}"
                )

    def scoring_for(self, item: pytest.Item) -> tuple[str, float | None, dict[str, Any]]:
        """The scorer for this test: its ``slm_equivalence`` mark, else ``[tool.slam] equivalence``."""
        config = dict(self.equivalence)
        mark = item.get_closest_marker(EQUIVALENCE_MARK)
        if mark is not None:
            config.update(mark.kwargs)
            if mark.args:
                config["by"] = mark.args[0]
        by = str(config.pop("by", "fuzzy"))
        at_least = config.pop("at_least", None)
        if by == "judge" and self.judge_complete is not None:
            config.setdefault("complete", self.judge_complete)
        return by, at_least, config

    def _budget(self, item: pytest.Item, ctx: TestContext, verdict: TestVerdict) -> None:
        from .metrics.budget import Budget, check_calls

        mark = item.get_closest_marker(BUDGET_MARK)
        if mark is None:
            return
        try:
            budget = Budget.from_kwargs(**mark.kwargs)
        except ValueError as exc:
            verdict.problems.append(str(exc))
            return
        breaches = check_calls(budget, [c.as_dict() for c in ctx.calls])
        verdict.breaches.extend(breaches)
        verdict.problems.extend(f"budget breached: {b}" for b in breaches)


def _wants_reference(item: pytest.Item) -> bool:
    """``@pytest.mark.slm(reference=False)``: generated inputs have no golden answer to pair with."""
    mark = item.get_closest_marker("slm")
    return mark is None or mark.kwargs.get("reference", True) is not False


def _key(call: Call) -> str:
    from .golden.keys import request_key

    return request_key(call.request)
