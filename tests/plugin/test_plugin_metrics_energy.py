"""GPU energy through a real pytest run, on whatever this machine really has.

A model marked GPU-served (``engine = { gpu = true }``) has each call metered with NVML. Without a
GPU or NVML (CI, developers' machines) the run says "not available" once, in one summary line,
and everything else (latency, tokens, cost) works; on a GPU machine the calls carry joules.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report

from pytest_slam.metrics.energy import GpuMeter
from pytest_slam.testing import FakeOpenAI

PRODUCT = """
import openai, pytest

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", ["Is the sky blue?", "Why is grass green?"])
def test_answer(slm_model, question):
    for _ in range(2):
        openai.OpenAI().chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": question}], max_tokens=8)
    assert len(slm_model.calls) == 2
"""


def _gpu_reason() -> tuple[bool, str]:
    meter = GpuMeter()
    try:
        return meter.available, meter.reason
    finally:
        meter.close()


def test_energy_per_call_and_test_or_one_line_saying_why_not(pytester: pytest.Pytester) -> None:
    available, reason = _gpu_reason()
    with FakeOpenAI("Yes.", model="local-gpu", latency_s=0.01) as server:
        pytester.makefile(
            ".toml",
            pyproject=f"""
            [tool.slam]
            reference = "none"

            [tool.slam.models.local-gpu]
            provider = "endpoint"
            base_url = "{server.base_url}"
            hourly_usd = 2.0
            engine = {{ gpu = true }}
            """,
        )
        pytester.makepyfile(test_product=PRODUCT)
        result = pytester.runpytest("--slm-models=local-gpu", "--slm-report=report.json")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "Traceback" not in out
    report = read_report(pytester.path / "report.json")
    assert report["run"]["gpu_telemetry"] == reason
    calls = [c for o in report["outcomes"] for c in o["calls"]]
    assert len(calls) == 4 and all(c["cost_usd"] and c["e2e_ms"] for c in calls)  # the rest works
    if available:
        for outcome in report["outcomes"]:
            energies = [c["energy_j"] for c in outcome["calls"]]
            assert all(e is not None and e >= 0 for e in energies)
            assert outcome["energy_j"] == pytest.approx(sum(energies))
        return
    assert reason.startswith("GPU telemetry not available (")
    assert out.count("not available") == 1, out
    (line,) = [line for line in result.stdout.lines if "not available" in line]
    assert line == f"energy: not measured; {reason}"
    assert all(c["energy_j"] is None for c in calls)
    assert all(o["energy_j"] is None for o in report["outcomes"])


def test_a_cpu_model_opens_no_gpu_telemetry(pytester: pytest.Pytester) -> None:
    with FakeOpenAI("Yes.") as server:
        pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
        pytester.makepyfile(test_product=PRODUCT)
        result = pytester.runpytest(
            f"--slm-models={server.base_url}#cpu-model", "--slm-report=r.json"
        )
    result.assert_outcomes(passed=2)
    assert read_report(pytester.path / "r.json")["run"]["gpu_telemetry"] == ""
    assert "not available" not in result.stdout.str()
