"""The fix a timed-out call's failure line gives names the timeout that fired (issue 52): "Raise
the model's timeout_s" only when the model's own ``timeout_s`` ended the call; when the product's
client (the openai SDK's ``timeout``, the agents SDK's, LiteLLM's) gave up first, the line says
that one is the product's to raise.

Real pytest runs (pytester) of a product without a fallback against a FakeOpenAI that hangs.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report
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


FRAMEWORK = """
import concurrent.futures, importlib, openai

try:  # the openai SDK's HTTP library: httpx, or httpx2 in its later releases
    httpx = importlib.import_module("httpx2")
except ImportError:
    import httpx

class Timeout(openai.APITimeoutError):
    '''As LiteLLM's own Timeout: a subclass of the openai SDK's APITimeoutError.'''

    def __init__(self, message):
        super().__init__(request=httpx.Request("POST", "http://llm/chat/completions"))
        self.message = message

_pool = concurrent.futures.ThreadPoolExecutor(1)
_abandoned = []

def classify():
    '''A framework's timer in another thread (LiteLLM's): the HTTP call goes on without it.'''
    client = openai.OpenAI(max_retries=0)
    future = _pool.submit(lambda: client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Classify as JSON"}],
        response_format={"type": "json_object"}))
    try:
        return future.result(timeout=0.3)
    except concurrent.futures.TimeoutError:
        _abandoned.append(future)
        raise Timeout("litellm.Timeout: the call took longer than 0.3 s") from None

def settled():
    '''The abandoned call's end (here before the test's: the race made certain).'''
    for future in _abandoned:
        concurrent.futures.wait([future])
"""
FRAMEWORK_TEST = """
import pytest, product

pytestmark = pytest.mark.slm

def test_classify():
    try:
        assert product.classify()
    finally:
        product.settled()
"""


def test_a_framework_timeout_before_a_runaway_answer_is_the_framework_s_timeout(
    pytester: pytest.Pytester,
) -> None:
    """The product's framework (a LiteLLM-like Timeout, an openai APITimeoutError) gave up on a
    slow structured call, whose answer then ran past the structured cap: the product never read
    it. The call is a timeout of the framework, with the framework's timeout as the fix; it was
    a "runaway" with the cap's fix and the structured cap's summary line (issue 52)."""
    pytester.makepyfile(product=FRAMEWORK, test_product=FRAMEWORK_TEST)
    filler = '{"notes": "' + "and so on " * 400
    with FakeOpenAI('{"sentiment": "positive"}') as ref, \
            FakeOpenAI(filler, latency_s=1.0) as slow:  # fmt: skip
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        result = pytester.runpytest(
            "-p", "no:cacheprovider", "-rf", "--slm-record=new",
            f"--slm-models={slow.base_url}#slow", "--slm-report=r.json",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert "the caller gave up (its own timeout: product.Timeout raised)" in out, out
    assert "The product's own client timeout ended it, not the model's timeout_s" in out
    assert "structured cap: the candidate ran away" not in out  # the summary's runaway line
    assert "set max_tokens in the request" not in out
    report = read_report(pytester.path / "r.json")
    calls = [c for o in report["outcomes"] if o["model"] == "slow" for c in o["calls"]]
    assert [c["error_kind"] for c in calls] == ["timeout"], calls
