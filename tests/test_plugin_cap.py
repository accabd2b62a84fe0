"""The generation cap: a candidate call without an output limit gets one; a call with its own keeps it.

Real pytest runs (pytester) through the proxy. The body a candidate received is read from the fake
server's request log; the real embedded engine (SmolLM2 via llama.cpp) shows a cut answer and the
summary line that says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slam_helpers import write_pyproject

from pytest_slam.testing import FakeOpenAI
from pytest_slam.testing.fake_openai import count_tokens

SUITE = """
import openai, pytest

pytestmark = pytest.mark.slm
MSG = [{"role": "user", "content": "How do I get a refund?"}]

def test_no_limit(slm_model):
    openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0)
    assert slm_model.calls[0].capped

def test_own_limit(slm_model):
    openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0,
                                            max_tokens=7)
    assert not slm_model.calls[0].capped
"""


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def calls(report: Path) -> dict[str, dict[str, Any]]:
    outcomes = json.loads(report.read_text(encoding="utf-8"))["outcomes"]
    return {o["nodeid"].split("::")[1].split("[")[0]: o["calls"][0] for o in outcomes}


def test_the_cap_follows_the_reference_and_leaves_own_limits_alone(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    pytester.makepyfile(test_cap=SUITE)
    pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{fake_gpt4.base_url}#gpt-4"
cap_factor = 3.0
cap_margin = 10
""")  # fmt: skip
    models = f"--slm-models={mini.base_url}#mini"
    first = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-record=new")
    first.assert_outcomes(passed=2)
    # No golden answer yet when the call was made: the model's ceiling (default 1024).
    assert [r.json.get("max_tokens") for r in mini.requests] == [1024, 7]

    mini.requests.clear()
    fake_gpt4.stop()
    replay = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-report=r.json")
    replay.assert_outcomes(passed=2)
    reference_tokens = count_tokens("GPT-4 says: How do I get a refund?")
    capped, own = (r.json for r in mini.requests)
    assert capped["max_tokens"] == 3 * reference_tokens + 10
    assert own["max_tokens"] == 7 and "max_completion_tokens" not in own
    by_test = calls(pytester.path / "r.json")
    assert by_test["test_no_limit"]["capped"]
    assert by_test["test_no_limit"]["cap"] == capped["max_tokens"]
    assert not by_test["test_own_limit"]["capped"] and by_test["test_own_limit"]["cap"] is None
    assert "max_tokens" not in by_test["test_no_limit"]["request"]  # the golden key is unchanged
    assert "generation cap" not in replay.stdout.str()  # nothing was cut


def test_the_embedded_engine_is_capped_and_the_summary_says_so(
    pytester: pytest.Pytester, smollm2_url: str
) -> None:
    pytester.makepyfile(test_cap=SUITE)
    write_pyproject(
        pytester,
        smollm2_url,
        name="smol",
        model="SmolLM2-135M-Instruct",
        extra="max_tokens_cap = 3\n",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
    result.assert_outcomes(passed=2)
    by_test = calls(pytester.path / "r.json")
    capped, own = by_test["test_no_limit"], by_test["test_own_limit"]
    assert capped["cap"] == 3 and capped["completion_tokens"] <= 3 and capped["cut_by_cap"]
    assert not own["capped"] and own["completion_tokens"] > 3
    result.stdout.fnmatch_lines(
        ["*generation cap: the answers of 1 test(s) were cut*test_no_limit?smol?*max_tokens_cap*"]
    )
