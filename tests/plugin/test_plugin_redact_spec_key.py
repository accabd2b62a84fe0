"""A candidate's key, read from the environment variable its spec names, never reaches a report.

Whatever that variable is called (``api_key_env = "MINI_KEY"``, not only ``*_API_KEY``): a prompt that
quotes it, and the candidate's answer that repeats it, are written with ``[redacted]``.
"""

from __future__ import annotations

import pytest
from slam_helpers import write_pyproject

from pytest_slam.testing import FakeOpenAI

KEY = "tgp_v1_Zq8mX2pLw7QvR4nT"
TESTS = """
import os, pytest
from openai import OpenAI

@pytest.mark.slm
def test_quotes_the_key():
    client = OpenAI(max_retries=0)
    r = client.chat.completions.create(model="gpt-4", temperature=0, messages=[
        {"role": "user", "content": "my config says key=" + os.environ["MINI_KEY"]}])
    assert r.choices[0].message.content
"""


def test_a_spec_key_with_any_variable_name_is_redacted_in_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINI_KEY", KEY)
    pytester.makepyfile(test_product=TESTS)
    echo = lambda req: "you said: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(echo, model="gpt-4o-mini") as mini:
        write_pyproject(pytester, mini.base_url, extra='api_key_env = "MINI_KEY"\n')
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json",
                                    "--slm-html=r.html")  # fmt: skip
        assert mini.hits == 1
    result.assert_outcomes(passed=1)
    report = (pytester.path / "r.json").read_text(encoding="utf-8")
    assert "key=[redacted]" in report  # the prompt and the answer that repeats it
    assert KEY not in report and KEY not in (pytester.path / "r.html").read_text(encoding="utf-8")
