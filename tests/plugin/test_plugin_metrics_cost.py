"""Cost and tokens through real pytest runs: a replayed GPT-4 golden answer priced by the dated
table (overridden in pyproject), a self-hosted candidate priced by its hourly rate, the ratio in
the terminal table, and tokens counted when the candidate's server reports none.

The hosted GPT-4 and the candidates are FakeOpenAI servers on loopback, with known token counts.
"""

from __future__ import annotations

import re

import pytest
from report_helpers import read_report

from pytest_slam.metrics import catalog
from pytest_slam.metrics.cost import cost_ratio
from pytest_slam.metrics.tokens import framed_prompt_count, openai_encoding
from pytest_slam.report import fmt
from pytest_slam.testing import FakeOpenAI

PRODUCT = """
import openai, pytest

pytestmark = pytest.mark.slm

def ask(question):
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], max_tokens=16)
    return r.choices[0].message.content

def test_sky(slm_model):
    assert ask("Is the sky blue?")

def test_grass(slm_model):
    assert ask("Why is grass green?")
"""
# FakeOpenAI's usage, as recorded with the golden answers: "Is the sky blue?" is 5 tokens, a prompt
# adds 3 and a message 4 (12); "GPT-4 says: Is the sky blue?" is 10. The same for the grass.
GOLDEN_PROMPT_TOKENS, GOLDEN_COMPLETION_TOKENS = 12, 10
GPT4_INPUT, GPT4_OUTPUT = 20.0, 40.0  # USD per 1M tokens, overriding the built-in 30/60
HOURLY_USD = 36.0


def _pyproject(reference_url: str, candidate_url: str) -> str:
    return f"""
[tool.slam]
reference = "{reference_url}#gpt-4"

[tool.slam.prices]
as_of = "2026-01"
gpt-4 = {{ input_per_mtok = {GPT4_INPUT}, output_per_mtok = {GPT4_OUTPUT} }}

[tool.slam.models.cheap]
provider = "endpoint"
base_url = "{candidate_url}"
model = "cheap-1"
hourly_usd = {HOURLY_USD}
"""


def test_replayed_gpt4_cost_self_hosted_cost_and_their_ratio(
    pytester: pytest.Pytester, fake_gpt4
) -> None:
    with FakeOpenAI("Yes, it is.", model="cheap-1", latency_s=0.02) as candidate:
        pytester.makefile(".toml", pyproject=_pyproject(fake_gpt4.base_url, candidate.base_url))
        pytester.makepyfile(test_product=PRODUCT)
        pytester.runpytest("--slm-models=cheap", "--slm-record=new").assert_outcomes(passed=2)
        recorded = fake_gpt4.hits
        result = pytester.runpytest("--slm-models=cheap", "--slm-report=report.json")
    result.assert_outcomes(passed=2)
    assert fake_gpt4.hits == recorded  # the second run replayed GPT-4 from the golden file
    report = read_report(pytester.path / "report.json")
    calls = [c for o in report["outcomes"] for c in o["calls"]]
    pairs = [p for o in report["outcomes"] for p in o["pairs"]]
    assert len(calls) == len(pairs) == 2
    gpt4_cost = (GOLDEN_PROMPT_TOKENS * GPT4_INPUT + GOLDEN_COMPLETION_TOKENS * GPT4_OUTPUT) / 1e6
    assert gpt4_cost == 0.00064
    for pair in pairs:
        assert pair["reference_model"] == "gpt-4-0613"  # a dated snapshot, priced as gpt-4
        assert (pair["reference_prompt_tokens"], pair["reference_completion_tokens"]) == (12, 10)
        assert pair["reference_cost_usd"] == gpt4_cost
    for call in calls:
        assert call["cost_usd"] == HOURLY_USD * (call["e2e_ms"] / 1000.0) / 3600.0
    ratio = cost_ratio([c["cost_usd"] for c in calls], [p["reference_cost_usd"] for p in pairs])
    (row,) = report["models"]
    assert row["cost_ratio"] == ratio
    assert report["reference"]["cost_per_call_usd"] == gpt4_cost
    table = result.stdout.lines
    (cheap,) = [line for line in table if line.startswith("cheap ")]
    (ref,) = [line for line in table if "(ref)" in line]
    assert re.search(rf"\s{re.escape(fmt.ratio(ratio))}$", cheap), cheap
    assert "$0.640" in ref and ref.endswith("1.00x")  # GPT-4: $0.00064 a call, $0.64 per 1,000


def test_tokens_are_counted_when_the_server_reports_none(pytester: pytest.Pytester) -> None:
    encoding, reason = openai_encoding("gpt-4")
    if encoding is None:
        pytest.skip(reason)
    answer = "The sky looks blue because air scatters blue light most."
    with FakeOpenAI(answer, report_usage=False) as server:  # ignores include_usage
        pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
        pytester.makepyfile(test_product=PRODUCT)
        spec = f"{server.base_url}#gpt-4"
        result = pytester.runpytest(f"--slm-models={spec}", "--slm-report=report.json")
    result.assert_outcomes(passed=2)
    report = read_report(pytester.path / "report.json")
    for outcome in report["outcomes"]:
        (call,) = outcome["calls"]
        assert call["tokens_estimated"] is True
        assert call["completion_tokens"] == len(encoding.encode(answer))
        assert call["prompt_tokens"] == framed_prompt_count(
            call["request"]["messages"], lambda t: len(encoding.encode(t))
        )
        assert (
            call["cost_usd"]
            == (call["prompt_tokens"] * 30.0 + call["completion_tokens"] * 60.0) / 1e6
        )
    (row,) = report["models"]
    assert row["tokens_estimated"] is True
    result.stdout.fnmatch_lines(["*token counts partly estimated*"])


IMPORTED = """
import sys

def pytest_unconfigure(config):
    with open("imported.txt", "a") as seen:
        seen.write(f"{'genai_prices' in sys.modules}\\n")
"""


@pytest.mark.skipif(catalog.version() is None, reason="genai-prices is not installed")
def test_a_second_run_prices_from_the_scratch_folder_without_importing_genai_prices(
    pytester: pytest.Pytester,
) -> None:
    """genai-prices' snapshot costs a run 0.15 s to import: it is read once per version."""
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(test_product=PRODUCT)
    pytester.makeconftest(IMPORTED)
    costs = []
    with FakeOpenAI("Yes, it is.") as server:
        for _ in range(2):
            args = (f"--slm-models={server.base_url}#gpt-4", "--slm-report=report.json")
            pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)
            report = read_report(pytester.path / "report.json")
            costs.append([c["cost_usd"] for o in report["outcomes"] for c in o["calls"]])
    assert (pytester.path / "imported.txt").read_text().split() == ["True", "False"]
    assert costs[0] == costs[1] and all(cost > 0 for cost in costs[0])  # gpt-4's list price
    (kept,) = pytester.path.glob("**/.slam/prices/*/*.json")
    assert read_report(kept)["key"].endswith(" openai gpt-4")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "[tool.slam.prices]\ngpt-4 = { input_per_mtok = 'cheap' }\n",
            "pytest-slam: [tool.slam.prices] 'gpt-4': input_per_mtok must be a number of USD >= 0, "
            "got 'cheap'",
        ),
        (
            "[tool.slam.budget]\np95_latency = 100\n",
            "pytest-slam: [tool.slam.budget]: unknown key 'p95_latency'; keys are <stat>_<metric>",
        ),
    ],
    ids=["prices", "budget"],
)
def test_a_bad_price_or_budget_table_is_a_usage_error(
    pytester: pytest.Pytester, table: str, message: str
) -> None:
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n\n" + table)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
