"""The terminal table: fits 100 columns, degrades on narrow terminals, shows the gate."""

from __future__ import annotations

import dataclasses

import pytest
import report_helpers as synth

from pytest_slam.report.aggregate import ModelRow, aggregate
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.terminal import fit_lines, gate_lines, render_table


@pytest.fixture(scope="module")
def verdict():
    return aggregate(synth.outcomes(), synth.run_info())


def _row(lines: list[str], model: str) -> str:
    return next(line for line in lines if line.startswith(model))


def test_default_width_fits_100_columns_with_units(verdict) -> None:
    lines = render_table(verdict)
    assert max(map(len, lines)) <= 100
    header = lines[1]
    for column in ("model", "gate", "tests", "equiv", "E2E p95", "$/1k calls", "vs ref $"):
        assert column in header
    qwen = _row(lines, synth.QWEN)
    assert "4/4" in qwen and "0.87" in qwen and "640 ms" in qwen and "0.0031x" in qwen
    assert "$0.040" in qwen and "0.66 (1f/5)" in _row(lines, synth.SMOL)
    assert "0.75 J" in _row(render_table(verdict, width=140), synth.QWEN)
    ref = _row(lines, synth.REFERENCE)
    assert "(ref)" in ref and "2960 ms" in ref and "$12.96" in ref and "1.00x" in ref
    assert "reference latency and cost: as recorded with the golden answers" in lines


def test_narrow_60_drops_low_priority_columns_first(verdict) -> None:
    lines = render_table(verdict, width=60)
    assert max(map(len, lines)) <= 60
    header = lines[1]
    assert all(c in header for c in ("model", "gate", "equiv", "E2E p95", "vs ref $"))
    assert "cold" not in header and "tokens" not in header and "CV" not in header
    assert "0.66" in _row(lines, synth.SMOL) and "874 ms" in _row(lines, synth.SMOL)


def _ran_away(verdict):
    """smollm2 with 10 of its 12 calls run away and one more failed (the issue's model)."""
    smol = verdict.row(synth.SMOL)
    ran = dataclasses.replace(smol, calls=12, calls_errored=11, calls_runaway=10)
    return dataclasses.replace(verdict, models=[ran, *verdict.models[1:]])


@pytest.mark.parametrize("width", [140, 100, 80, 64])
def test_the_equivalence_cell_names_runaways_and_failed_calls(verdict, width: int) -> None:
    """The mean never reads alone for a model whose calls failed: the runaways and the other
    failed calls beside it (the old cell named the runaways alone, ``0.66 (10/12 runaway)``, 4
    characters wider), abbreviated with a legend under the table; at any width."""
    lines = render_table(_ran_away(verdict), width=width)
    assert max(map(len, lines)) <= width
    assert lines[1].split()[:4] == ["model", "gate", "tests", "equiv"] or "pass" in lines[1]
    assert "  0.66 (10r 1f/12)  " in _row(lines, synth.SMOL)
    assert "  0.87  " in _row(lines, synth.QWEN)  # a model with no failed call: its mean alone
    said = " ".join(" ".join(lines).split())
    legend = "equiv (Nr Nf/calls): of the model's calls, N ran away (r) and N failed otherwise (f)"
    assert said.count(legend) == 1


def test_the_vertical_layout_says_failed_calls_in_words(verdict) -> None:
    lines = render_table(_ran_away(verdict), width=40)
    at = lines.index("  mean equivalence: 0.66 (10/12 runaway,")
    assert lines[at + 1] == "    1/12 failed)" and "Nr Nf" not in " ".join(lines)


def test_no_legend_where_no_call_failed() -> None:
    verdict = aggregate(synth.qwen_outcomes(), synth.run_info((synth.QWEN,)))
    assert "Nr Nf" not in " ".join(render_table(verdict, width=80))


def test_very_narrow_turns_vertical_per_model(verdict) -> None:
    lines = render_table(verdict, width=36)
    assert max(map(len, lines)) <= 36
    assert "smollm2-135m  [-]" in lines
    at = lines.index("  mean equivalence: 0.66 (1/5")  # wrapped, never cut: its failed call
    assert lines[at + 1] == "    failed)"
    assert "  cost ratio to reference: 0.0021x" in lines


def test_names_that_would_look_alike_turn_vertical() -> None:
    names = (
        "FuseChat-Llama-3.2-1B-Instruct-abliterated",
        "FuseChat-Llama-3.2-3B-Instruct-abliterated",
    )
    outcomes = [{**o, "model": n} for n in names for o in synth.qwen_outcomes()]
    verdict = aggregate(outcomes, synth.run_info(models=names))
    wide = render_table(verdict, width=100)
    assert len({line.split()[0] for line in wide if line.startswith("FuseCh")}) == 2
    narrow = render_table(verdict, width=44)
    assert max(map(len, narrow)) <= 44
    assert "  mean equivalence: 0.87" in narrow  # vertical: one block per model


def test_wide_terminal_shows_every_column(verdict) -> None:
    header = render_table(verdict, width=220)[1]
    for column in ("pass", "TTFT p50", "E2E p50", "CV", "out tok/s", "J/out tok", "cold"):
        assert column in header
    assert "~998+373" in _row(render_table(verdict, width=220), synth.SMOL)  # estimated tokens


def test_long_model_names_are_shortened_not_overflowing() -> None:
    long_name = "vllm:Qwen/Qwen2.5-1.5B-Instruct-GPTQ-Int4-very-long-suffix"
    outcomes = [{**o, "model": long_name} for o in synth.qwen_outcomes()]
    verdict = aggregate(outcomes, synth.run_info(models=(long_name,)))
    lines = render_table(verdict, width=60)
    assert max(map(len, lines)) <= 60
    (row,) = [line for line in lines if line.startswith("vllm:")]
    assert "…" in row and row.split()[0].endswith("-suffix")


def test_gate_column_and_breach_lines() -> None:
    verdict = aggregate(synth.outcomes(), synth.run_info())
    apply_gate(verdict, evaluate(Gate(min_mean_equivalence=0.8), verdict))
    lines = render_table(verdict)
    assert " FAIL " in _row(lines, synth.SMOL) and " PASS " in _row(lines, synth.QWEN)
    assert _row(lines, synth.REFERENCE).split()[2] == "-"  # the reference is never gated
    assert "gate: FAIL" not in lines  # the plugin prints gate_lines after the baseline diff
    assert gate_lines(verdict) == [
        "gate: FAIL",
        "  smollm2-135m: min_mean_equivalence: 0.495 is below the minimum 0.800",
    ]


def test_energy_note_when_nothing_was_measured() -> None:
    verdict = aggregate(synth.mini_outcomes(), synth.run_info(models=(synth.MINI,)))
    lines = render_table(verdict)
    assert "energy: not measured; GPU telemetry: NVML available for vLLM only" in lines


def test_no_results_says_so() -> None:
    verdict = aggregate([], synth.run_info(models=()))
    verdict.reference = None
    assert render_table(verdict)[-1] == "no model results"


def test_fit_lines_wraps_under_the_indent_and_keeps_paths_whole() -> None:
    path = "/tmp/pytest-of-someone/pytest-12/test_a_rather_long_test_name0/report.json"
    lines = fit_lines(["short", f"  mini: no_regression: 4 regression(s) vs {path} (more)"], 40)
    assert lines == [
        "short",
        "  mini: no_regression: 4 regression(s)",
        "    vs",
        f"    {path}",
        "    (more)",
    ]
    assert fit_lines(["x" * 50], 40) == ["x" * 50]  # one word longer than the width stays whole


def test_a_reference_without_timings_says_so(verdict) -> None:
    curated = aggregate(synth.qwen_outcomes(), synth.run_info((synth.QWEN,)))
    curated.reference = ModelRow(model="curated", role="reference", calls=4)
    assert "reference curated: its golden answers carry no latency or cost" in render_table(curated)
    assert "reference latency and cost: as recorded with the golden answers" in render_table(
        verdict
    )


def test_not_swapped_column_and_note_appear_only_when_a_test_was_not_swapped(verdict) -> None:
    assert "not swapped" not in render_table(verdict)[1]
    outcomes = synth.qwen_outcomes()
    outcomes[0] = {**outcomes[0], "outcome": "not_swapped", "calls": [], "pairs": []}
    unswapped = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    lines = render_table(unswapped)
    assert lines[1].split()[:5] == ["model", "gate", "tests", "not", "swapped"]
    assert _row(lines, synth.QWEN).split()[2:4] == ["3/3", "1"]
    note = " ".join(" ".join(lines).split())
    assert f"not swapped: 1 test(s) passed with no call the candidate answered, so they count for " \
           f"no model: {outcomes[0]['test']} ({synth.QWEN})" in note  # fmt: skip


def test_egress_note_names_each_destination_and_test() -> None:
    outcomes = synth.mini_outcomes()
    outcomes[0] = {**outcomes[0], "egress": ["api.openai.com:443", "api.openai.com:443"]}
    lines = render_table(aggregate(outcomes, synth.run_info((synth.MINI,))), width=400)
    assert (f"2 connection(s) left the machine during opted-in tests: api.openai.com:443 from "
            f"{outcomes[0]['test']} ({synth.MINI}) (2x)") in " ".join(lines)  # fmt: skip
