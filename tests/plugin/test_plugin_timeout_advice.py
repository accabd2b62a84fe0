"""The fix a timed-out call's failure line gives names the timeout that fired (issue 52): "Raise
the model's timeout_s" only when the model's own ``timeout_s`` ended the call; when the product's
client (the openai SDK's ``timeout``, the agents SDK's, LiteLLM's) gave up first, the line says
that one is the product's to raise.

Real pytest runs (pytester) of a product without a fallback against a FakeOpenAI that hangs.
"""

from __future__ import annotations

import pytest
from slam_helpers import write_pyproject

from pytest_slam.testing import FakeOpenAI

PRODUCT = """
import openai

def ask():
    client = openai.OpenAI(max_retries=0, **{options!r})
    reply = client.chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": "Hi"}}])
    return reply.choices[0].message.content
"""
TEST = "import pytest, product\n\n@pytest.mark.slm\ndef test_one():\n    assert product.ask()\n"


@pytest.mark.parametrize(
    ("options", "table", "fix", "not_said"),
    [
        ({"timeout": 0.5}, "", "The product's own client timeout ended it", "timeout_s, or"),
        ({}, "timeout_s = 0.5\n", "Raise the model's timeout_s", "product's own client"),
    ],
    ids=["the product's client", "the model's timeout_s"],
)
def test_the_fix_names_the_timeout_that_fired(
    pytester: pytest.Pytester, options: dict[str, float], table: str, fix: str, not_said: str
) -> None:
    pytester.makepyfile(product=PRODUCT.format(options=options), test_product=TEST)
    with FakeOpenAI("Hello.", fail=["timeout"], timeout_sleep_s=5) as fake:
        write_pyproject(pytester, fake.base_url, extra=table)
        result = pytester.runpytest("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert fix in out and not_said not in out
