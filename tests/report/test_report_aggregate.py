"""Aggregation: every number of the verdict, worked out by hand from test_report_helpers."""

from __future__ import annotations

import random
import statistics

import pytest
import report_helpers as synth

from pytest_slam.records import Outcome, Pair, Score
from pytest_slam.report.aggregate import Verdict, aggregate, per_test_rows
from pytest_slam.report.terminal import render_table


@pytest.fixture(scope="module")
def verdict():
    return aggregate(synth.outcomes(), synth.run_info())


def test_rows_follow_the_run_order_then_the_reference(verdict) -> None:
    assert [r.model for r in verdict.rows] == [synth.SMOL, synth.QWEN, synth.MINI, synth.REFERENCE]
    assert verdict.reference.is_reference and not verdict.models[0].is_reference


def test_failing_model_counts_and_equivalence(verdict) -> None:
    smol = verdict.row(synth.SMOL)
    assert (smol.tests_passed, smol.tests_failed, smol.tests_errored, smol.tests_skipped) == (
        1, 2, 1, 0,
    )  # fmt: skip
    assert smol.pass_rate == 0.25
    # five candidate calls; the passthrough embedder call is not the model's
    assert (smol.calls, smol.calls_errored, smol.cold_starts) == (5, 1, 1)
    assert (smol.pairs, smol.missing_golden) == (4, 1)
    # pairs: (0.92+0.88)/2, (0.61+0.35)/2, (0.70+0.50)/2; the missing golden is not scored
    assert smol.equivalence_mean == pytest.approx((0.90 + 0.48 + 0.60) / 3)
    assert smol.equivalence_worst == pytest.approx(0.48)
    assert smol.equivalence_by_scorer == pytest.approx(
        {"embedding": (0.92 + 0.61 + 0.70) / 3, "judge": (0.88 + 0.35 + 0.50) / 3}
    )


def test_latency_excludes_cold_start_errors_and_uses_linear_percentiles(verdict) -> None:
    smol = verdict.row(synth.SMOL)
    # measured: 640, 580, 900 (the 210 ms call was the cold start, the errored one has no time)
    assert smol.latency_samples == 3
    assert smol.e2e_p50_ms == 640.0
    assert smol.e2e_p95_ms == pytest.approx(640 + 0.9 * (900 - 640))  # rank 1.9
    assert smol.ttft_p50_ms == 50.0
    assert smol.e2e_std_ms == pytest.approx(statistics.pstdev([640, 580, 900]))
    assert smol.e2e_cv == pytest.approx(statistics.pstdev([640, 580, 900]) / (2120 / 3))
    assert smol.output_tokens_per_s == pytest.approx((96 + 88 + 180) / 2.120)


def test_tokens_cost_and_ratio_over_the_same_requests(verdict) -> None:
    smol = verdict.row(synth.SMOL)
    assert (smol.prompt_tokens, smol.completion_tokens) == (52 + 410 + 385 + 151, 9 + 96 + 88 + 180)
    assert smol.tokens_estimated is True
    assert smol.cost_per_call_usd == pytest.approx((12 + 36 + 32 + 50) / 4 * 1e-6)
    assert smol.cost_per_1000_calls_usd == pytest.approx(0.0325)
    # only requests both sides priced: triage, summ1, summ2 (not the unpaired reply)
    assert smol.cost_ratio == pytest.approx((12 + 36 + 32) * 1e-6 / (0.0021 + 0.0192 + 0.0174))


def test_energy_per_call_and_per_output_token(verdict) -> None:
    qwen = verdict.row(synth.QWEN)
    assert qwen.energy_per_call_j == pytest.approx(350 / 5)
    assert qwen.energy_per_output_token_j == pytest.approx(350 / 465)
    assert verdict.row(synth.MINI).energy_per_call_j is None
    assert verdict.row(synth.MINI).energy_per_output_token_j is None


def test_clean_model_and_skips(verdict) -> None:
    qwen, mini = verdict.row(synth.QWEN), verdict.row(synth.MINI)
    assert qwen.pass_rate == 1.0 and qwen.equivalence_mean == pytest.approx(0.874)
    assert qwen.e2e_p95_ms == pytest.approx(400 + 0.8 * 300)
    assert (mini.tests_passed, mini.tests_skipped, mini.pass_rate) == (3, 1, 1.0)
    assert mini.cost_ratio == pytest.approx(
        (0.0000141 + 0.000129 + 0.0001158 + 0.0001455) / (0.0021 + 0.0192 + 0.0174 + 0.0165)
    )


def test_reference_row_is_as_recorded_once_per_golden_key(verdict) -> None:
    ref = verdict.reference
    assert ref.model == synth.REFERENCE and ref.calls == 5  # five keys, seen by three models
    assert ref.e2e_p50_ms == 2000.0  # recorded: 900, 1500, 2000, 2400, 3100
    assert ref.e2e_p95_ms == pytest.approx(2400 + 0.8 * 700)
    assert ref.ttft_p50_ms == 320.0
    assert ref.cost_per_call_usd == pytest.approx(0.0648 / 5)
    assert ref.cost_per_1000_calls_usd == pytest.approx(12.96)
    assert ref.cost_ratio == 1.0
    assert (ref.prompt_tokens, ref.completion_tokens) == (1180, 490)
    assert ref.equivalence_mean is None and ref.pass_rate is None


def test_any_order_gives_the_identical_verdict() -> None:
    """An xdist run hands outcomes over in any order; the verdict must not change a bit."""
    expected = aggregate(synth.outcomes(), synth.run_info()).as_dict()
    shuffled = synth.outcomes()
    for seed in range(5):
        random.Random(seed).shuffle(shuffled)
        assert aggregate(shuffled, synth.run_info()).as_dict() == expected


def test_per_test_rows_fold_repeats_and_keep_the_worst_outcome() -> None:
    runs = synth.qwen_outcomes()[:1] * 2
    runs[1] = {**runs[1], "outcome": "failed", "repeat": 2, "message": "flaky"}
    (row,) = per_test_rows(runs)
    assert (row.outcome, row.runs, row.calls, row.message) == ("failed", 2, 2, "flaky")
    assert row.equivalence_mean == pytest.approx(0.925)


def test_model_without_outcomes_and_unknown_models() -> None:
    info = synth.run_info(models=(synth.QWEN, "phi-3-mini"))
    verdict = aggregate(synth.qwen_outcomes() + synth.mini_outcomes(), info)
    assert [r.model for r in verdict.models] == [synth.QWEN, "phi-3-mini", synth.MINI]
    empty = verdict.row("phi-3-mini")
    assert empty.calls == 0 and empty.pass_rate is None and empty.e2e_p95_ms is None


def test_pair_equivalence_of_a_missing_or_unscored_pair_is_none() -> None:
    scored = Pair(0, "k", "golden.json", None, missing=True, scores=[Score("x", 1.0)])
    assert scored.equivalence is None
    assert Pair(0, "k", "golden.json", "answer", scores=[]).equivalence is None


def test_an_engine_warm_up_is_a_cold_start_not_a_call_or_a_test(verdict) -> None:
    warm_up = Outcome(nodeid=f"(engine start: {synth.QWEN})", test="(engine start)",
                      model=synth.QWEN, outcome="engine", duration_s=4.2,
                      calls=[synth.call(synth.QWEN, "Hi", 900, 2500, 9, 4, 0.5, key="warm",
                                        cold_start=True)]).as_dict()  # fmt: skip
    with_engine = aggregate([*synth.outcomes(), warm_up], synth.run_info())
    before, after = verdict.row(synth.QWEN), with_engine.row(synth.QWEN)
    assert after.cold_starts == before.cold_starts + 1
    assert (after.calls, after.prompt_tokens, after.cost_per_call_usd) == (
        before.calls, before.prompt_tokens, before.cost_per_call_usd,
    )  # fmt: skip
    assert [t.test for t in with_engine.tests] == [t.test for t in verdict.tests]


def test_a_test_listed_twice_counts_once_with_its_worst_outcome() -> None:
    """A report that lists a test's passing call and its teardown error counts the test once."""
    first = synth.qwen_outcomes()[0]
    twice = [*synth.qwen_outcomes(), {**first, "outcome": "error", "message": "teardown"}]
    once = aggregate(synth.qwen_outcomes(), synth.run_info((synth.QWEN,))).row(synth.QWEN)
    row = aggregate(twice, synth.run_info((synth.QWEN,))).row(synth.QWEN)
    assert row.tests_run == once.tests_run and row.tests_errored == 1
    assert row.tests_passed == once.tests_passed - 1


def test_not_swapped_is_its_own_count_outside_the_pass_rate() -> None:
    outcomes = synth.qwen_outcomes()
    outcomes[0] = {**outcomes[0], "outcome": "not_swapped", "calls": [], "pairs": []}
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    row = verdict.row(synth.QWEN)
    assert (row.tests_not_swapped, row.tests_passed, row.pass_rate) == (1, len(outcomes) - 1, 1.0)
    assert [t.outcome for t in verdict.tests].count("not_swapped") == 1


LONG_ANSWER = " ".join(f"word{i}" for i in range(150))  # an open-ended answer of 150 words


def _similarity_run(change: str = "") -> Verdict:
    """qwen's run with long reference answers scored by fuzzy alone, no threshold; ``change``
    adds one kind of calibration (or makes the answers short)."""
    outcomes = synth.qwen_outcomes()
    for pair in (p for o in outcomes for p in o["pairs"]):
        pair["reference_text"] = "Short answer." if change == "short" else LONG_ANSWER
        pair["scores"] = [Score("fuzzy", 0.6, threshold=0.7 if change == "at_least" else None)
                          .as_dict()]  # fmt: skip
        if change == "judge":
            pair["scores"].append(Score("judge", 0.8).as_dict())
    info = synth.run_info((synth.QWEN,))
    info.settings["samples"] = 3 if change == "samples" else 1
    return aggregate(outcomes, info)


def test_similarity_with_no_verdict_asked_for_says_once_how_to_get_one() -> None:
    verdict = _similarity_run()
    (note,) = verdict.notes
    assert note.startswith(
        "no verdict: 5 pair(s) have fuzzy similarity only, reported with its interval; none is "
        "called equivalent or different (median reference answer 150 words: on long open-ended "
        "answers similarity agrees poorly with graded quality"
    )
    for how in ("`slam calibrate`", "at_least", "[tool.slam] judge", 'then = ["judge"]',
                "`slam review`"):  # fmt: skip
        assert how in note
    assert Verdict.from_dict(verdict.as_dict()).notes == [note]  # kept in the JSON report
    said = " ".join(" ".join(render_table(verdict, width=100)).split())
    assert said.count("no verdict:") == 1 and note in said


@pytest.mark.parametrize("change", ["at_least", "judge"])
def test_no_note_when_a_verdict_was_asked_for(change: str) -> None:
    assert _similarity_run(change).notes == []


@pytest.mark.parametrize("change", ["samples", "short"])
def test_short_answers_or_samples_still_have_no_verdict_but_no_length_warning(change: str) -> None:
    (note,) = _similarity_run(change).notes
    assert note.startswith("no verdict: 5 pair(s)") and "median reference answer" not in note


def _loaded_run() -> list[dict]:
    """gpt-4o-mini's four tests: two calls sent alone (300, 320 ms) and six at 16 in flight
    (700-800 ms), as a run with an alone sample leaves them."""
    e2e = [(300, True), (700, False), (720, False), (740, False), (320, True), (760, False),
           (780, False), (800, False)]  # fmt: skip
    calls = [
        synth.call(
            synth.MINI,
            "ok",
            50,
            ms,
            10,
            5,
            None,
            key=f"k{i}",
            alone=alone,
            in_flight=1 if alone else 16,
        )
        for i, (ms, alone) in enumerate(e2e)
    ]
    return [
        synth.outcome(synth.MINI, test, "passed", calls[2 * i : 2 * i + 2], [])
        for i, test in enumerate(synth.TESTS)
    ]


def test_the_latency_a_user_meets_is_the_alone_sample_with_the_loaded_one_beside() -> None:
    """Budgets, the gate and a baseline read the row's percentiles: those of the calls sent
    alone; the latency under the run's own load is kept beside them, in the row and the note."""
    from pytest_slam.metrics.latency import flatten_model
    from pytest_slam.report.terminal import concurrency_note

    outcomes = _loaded_run()
    row = aggregate(outcomes, synth.run_info((synth.MINI,))).row(synth.MINI)
    assert row is not None and row.latency_alone == 2 and row.latency_samples == 2
    assert row.e2e_p95_ms == pytest.approx(319.0)  # over 300 and 320 only
    assert row.e2e_p95_loaded_ms == pytest.approx(795.0) and row.in_flight_max == 16
    note = concurrency_note([row])
    assert note is not None
    assert "gpt-4o-mini: E2E p95 319 ms alone (2 calls), 795 ms at up to 16" in note
    flat = flatten_model([c for o in outcomes for c in o["calls"]])
    assert flat["p95_e2e_ms"] == pytest.approx(319.0)  # what [tool.slam.budget] checks
    assert flat["under_load_p95_e2e_ms"] == pytest.approx(795.0)


def test_without_an_alone_sample_the_latency_is_every_measured_call() -> None:
    outcomes = _loaded_run()
    for o in outcomes:
        for c in o["calls"]:
            c["alone"] = False
    row = aggregate(outcomes, synth.run_info((synth.MINI,))).row(synth.MINI)
    assert row is not None and row.latency_alone == 0 and row.latency_samples == 8
    assert row.e2e_p95_loaded_ms is None and row.e2e_p95_ms == pytest.approx(793.0)
