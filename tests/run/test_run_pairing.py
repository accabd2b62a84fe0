"""Pairing after a test (run/score/pairing.py), without a socket: a real golden store in tmp_path, a
replay ReferenceService, and the Calls a test would have made."""

from __future__ import annotations

from pathlib import Path

from golden_helpers import rec

from pytest_slam.golden.reference import ReferenceService
from pytest_slam.golden.store import GoldenStore
from pytest_slam.metrics.cost import Prices
from pytest_slam.records import Call, ModelSpec
from pytest_slam.run.score.pairing import call_key, pair_calls
from pytest_slam.run.score.verdict import TestVerdict
from pytest_slam.swap.router import TestContext

MODULE, NODE = "tests/test_triage.py", "tests/test_triage.py::test_t[cand]"


def _replay(tmp_path: Path, *records) -> ReferenceService:
    written = GoldenStore(tmp_path / "__slam__", "openai:gpt-4", write_through=True)
    for r in records:
        written.record(MODULE, r, "tests/test_triage.py::test_t")
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")  # the replay run's own
    return ReferenceService(ModelSpec("openai:gpt-4", "openai", "gpt-4"), store, mode="none")


def _context(*calls: Call) -> TestContext:
    ctx = TestContext(
        NODE, "tests/test_triage.py::test_t", MODULE, ModelSpec("cand", "openai", "c")
    )
    ctx.calls.extend(calls)
    return ctx


def _call(prompt: str, text: str | None = "ok", error: str | None = None) -> Call:
    golden = rec(prompt)  # the same request the golden record was made of
    return Call(
        model="cand", role="candidate", request=golden.request, text=text or "", error=error
    )


def test_an_answered_call_pairs_with_its_golden_answer_priced_at_the_reference(
    tmp_path: Path,
) -> None:
    reference = _replay(tmp_path, rec("Charged twice", text="Refund it."))
    verdict = TestVerdict()
    call = _call("Charged twice")
    pair_calls(reference, Prices(), _context(call), verdict, failed=False)
    (pair,) = verdict.pairs
    assert (pair.reference_text, pair.reference_model, pair.missing) == (
        "Refund it.",
        "gpt-4-0613",
        False,
    )
    assert (pair.reference_prompt_tokens, pair.reference_completion_tokens) == (12, 3)
    assert pair.reference_cost_usd == Prices().get("gpt-4-0613").cost(12, 3)
    assert verdict.problems == [] and call.key == call_key(call) == pair.key
    assert verdict.records[0].key == pair.key


def test_a_call_with_no_golden_answer_is_a_missing_pair_and_a_problem_unless_the_test_failed(
    tmp_path: Path,
) -> None:
    reference = _replay(tmp_path, rec("Charged twice"))
    for failed, problems in ((False, 1), (True, 0)):
        verdict = TestVerdict()
        pair_calls(reference, Prices(), _context(_call("Never recorded")), verdict, failed)
        (pair,) = verdict.pairs
        assert pair.missing and pair.reference_text is None
        assert len(verdict.problems) == problems
        if problems:
            assert (
                verdict.problems[0].startswith("call 1: ") and "--slm-record" in verdict.problems[0]
            )


def test_an_unanswered_call_pairs_with_nothing_yet_its_entry_is_visited(tmp_path: Path) -> None:
    reference = _replay(tmp_path, rec("Charged twice"))
    verdict = TestVerdict()
    call = _call("Charged twice", text=None, error="model 'cand' is unreachable")
    pair_calls(reference, Prices(), _context(call), verdict, failed=False)
    assert verdict.pairs == [] and verdict.problems == []
    assert call_key(call) in reference.store.visited[MODULE]  # never reported stale for it


def test_a_miss_refused_before_the_candidate_was_asked_is_a_missing_pair(tmp_path: Path) -> None:
    reference = _replay(tmp_path)
    ctx = _context()
    ctx.misses.append((1, "abc123", "no golden answer; record it with --slm-record=new"))
    verdict = TestVerdict()
    pair_calls(reference, Prices(), ctx, verdict, failed=False)
    (pair,) = verdict.pairs
    assert (pair.call_index, pair.key, pair.missing) == (0, "abc123", True)
    assert verdict.problems == ["call 1: no golden answer; record it with --slm-record=new"]
