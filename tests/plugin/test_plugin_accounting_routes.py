"""A call on another candidate's route is no evidence for the test's own candidate.

``slm_model.base_url`` names one candidate's route (``/m/NAME``). Product code that keeps the first
client it is handed (a module-level singleton) sends the next model's test to the first model: the
test passes on answers its own candidate never gave, so it must be ``not_swapped``.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

CACHED_CLIENT = """
import pytest
from openai import OpenAI

_client = None

def client(base_url):
    global _client
    if _client is None:  # the first client wins: a singleton, as product code often keeps one
        _client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    return _client

@pytest.mark.slm
def test_cached(slm_model):
    r = client(slm_model.base_url).chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "hi"}], temperature=0)
    assert r.choices[0].message.content
"""


def test_a_call_on_another_models_route_does_not_count_for_this_model(
    pytester: pytest.Pytester,
) -> None:
    with FakeOpenAI(answer="from a", model="ma") as a, FakeOpenAI(answer="from b", model="mb") as b:
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["a", "b"]
reference = "none"

[tool.slam.models.a]
base_url = "{a.base_url}"
model = "ma"

[tool.slam.models.b]
base_url = "{b.base_url}"
model = "mb"
""")  # fmt: skip
        pytester.makepyfile(test_product=CACHED_CLIENT)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
        assert b.hits == 0  # b answered nothing: both tests' calls went to a
    result.assert_outcomes(passed=2)
    report = read_report(pytester.path / "r.json")
    outcomes = {o["nodeid"].split("::")[1]: o for o in report["outcomes"]}
    assert outcomes["test_cached[a]"]["outcome"] == "passed"
    assert outcomes["test_cached[b]"]["outcome"] == "not_swapped"
    assert [c["model"] for c in outcomes["test_cached[b]"].get("calls", [])] in ([], ["b"])


FALLBACK_CALLS_ZERO = """
import pytest
from openai import OpenAI

@pytest.mark.slm(calls=0)
def test_said_no_calls_but_asked():
    try:
        OpenAI(max_retries=0).chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "hi"}], temperature=0)
    except Exception:
        pass  # the product's fallback: the candidate's failure is swallowed
"""


def test_calls_zero_does_not_excuse_calls_the_candidate_failed(pytester: pytest.Pytester) -> None:
    """``slm(calls=0)`` exempts a test that makes no call; one whose call the candidate failed is
    a failed test of the candidate, whatever the product did with the error."""
    with FakeOpenAI("never", model="gpt-4o-mini", fail=[500]) as mini:
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]
reference = "none"

[tool.slam.models.mini]
base_url = "{mini.base_url}"
""")  # fmt: skip
        pytester.makepyfile(test_product=FALLBACK_CALLS_ZERO)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
        assert mini.hits == 1
    result.assert_outcomes(passed=1)
    (outcome,) = read_report(pytester.path / "r.json")["outcomes"]
    assert outcome["outcome"] == "candidate_failed"
    assert outcome["calls"][0]["error_kind"] == "http"
