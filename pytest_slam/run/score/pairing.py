"""After an opted-in test: each answered candidate call paired with its golden answer.

A pair carries the reference's side (its text, tokens, latency as recorded, and its list price);
scoring it is ``checks.py``'s. A call with no golden answer is a missing pair and a problem of the
test (unless the test's own code failed first). A call refused before the candidate was asked
(a replay miss, ``ReferenceService.miss_before``) is one too. An unanswered call pairs with
nothing, yet its entry counts as visited, so it is never reported stale for this test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.reference import MissingGolden, ReferenceFailed, ReferenceService
from pytest_slam.records import Call, GoldenRecord, Pair
from pytest_slam.run.score.verdict import TestVerdict
from pytest_slam.swap.router import TestContext

if TYPE_CHECKING:
    from pytest_slam.metrics.cost import Prices


def wants_reference(item: pytest.Item) -> bool:
    """``@pytest.mark.slm(reference=False)``: generated inputs have no golden answer to pair with."""
    mark = item.get_closest_marker("slm")
    return mark is None or mark.kwargs.get("reference", True) is not False


def pair_calls(
    reference: ReferenceService,
    prices: Prices,
    ctx: TestContext,
    verdict: TestVerdict,
    failed: bool,
) -> None:
    """Every call of the test in ``ctx`` paired, onto ``verdict`` (``failed``: the test's own
    code failed, so a missing golden answer is no problem of its own)."""
    path = str(reference.store.path_for(ctx.module))
    for turn, key, message in ctx.misses:  # refused before the candidate was asked
        verdict.pairs.append(Pair(turn - 1, key, path, None, missing=True))
        verdict.problems.append(f"call {turn}: {message}")
    for index, call in enumerate(ctx.calls):
        if call.ok:
            _pair(reference, prices, ctx, index, call, verdict, failed, path)
        else:  # unanswered, yet the test asked for this entry: never stale for it
            reference.store.mark_used(ctx.module, call_key(call), ctx.test)


def _pair(
    reference: ReferenceService,
    prices: Prices,
    ctx: TestContext,
    index: int,
    call: Call,
    verdict: TestVerdict,
    failed: bool,
    path: str,
) -> None:
    key = call_key(call)
    try:
        rec = reference.answer(ctx.module, ctx.test, call.request, ctx.nodeid, index + 1, key=key)
    except (MissingGolden, GoldenError, ReferenceFailed) as exc:
        verdict.pairs.append(Pair(index, key, path, None, missing=True))
        if not failed:
            verdict.problems.append(f"call {index + 1}: {exc}")
        return
    call.key = rec.key
    verdict.records[index] = rec
    pair = reference_side(index, rec, path, reference.spec.model_id, prices)
    if rec.key != key:  # the reference's turn at this place (golden.turns)
        earlier = [p.diverged_at for p in verdict.pairs if p.diverged_at is not None]
        pair.diverged_at = earlier[0] if earlier else index + 1
    verdict.pairs.append(pair)


def reference_side(
    index: int, rec: GoldenRecord, path: str, model_id: str | None, prices: Prices
) -> Pair:
    """The pair of call ``index`` with its golden record's first answer (by ``model_id``, the
    reference's, when the answer names no model), priced at the reference's list price."""
    from pytest_slam.metrics.cost import api_call_cost

    ans = rec.answers[0]
    model = ans.model or model_id
    return Pair(
        call_index=index,
        key=rec.key,
        golden_file=path,
        reference_text=ans.text,
        reference_model=model,
        reference_prompt_tokens=ans.prompt_tokens,
        reference_completion_tokens=ans.completion_tokens,
        reference_e2e_ms=ans.e2e_ms,
        reference_ttft_ms=ans.ttft_ms,
        reference_tool_calls=ans.tool_calls,
        reference_cost_usd=api_call_cost(
            model or "", ans.prompt_tokens, ans.completion_tokens, prices
        ),
    )


def call_key(call: Call) -> str:
    """The call's golden key: the one its swap computed, else computed now."""
    if call.request_key is None:
        from pytest_slam.golden.keys import request_key

        call.request_key = request_key(call.request)
    return call.request_key
