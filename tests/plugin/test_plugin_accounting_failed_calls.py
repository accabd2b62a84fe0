"""A candidate that fails in any way is a failed candidate, also when the product swallows the error.

Real pytest runs (pytester) of a product that catches the SDK's errors and answers a fallback, as
products do; the candidate is a FakeOpenAI on loopback that hangs on its first four requests
(then closes without answering) and answers the fifth. The product's five tests all pass their
assertions; the run's gate fails, with ``allow_not_swapped = true``, naming the timeout. Each way a
call can go: a plain sync call (served in memory, in the caller's thread), a stream (a worker), an
AsyncOpenAI call (over the loopback socket), and the model's own ``timeout_s``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from patience import factor
from report_helpers import read_report
from slam_helpers import said, write_pyproject

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

PRODUCT = """
import asyncio
import openai

MODE, OPTIONS = {mode!r}, {options!r}
FALLBACK = "Sorry, I cannot answer that right now."
MESSAGES = [{{"role": "user", "content": "How do I reset my password?"}}]


async def _ask_async():
    async with openai.AsyncOpenAI(**OPTIONS) as client:
        reply = await client.chat.completions.create(model="gpt-4", messages=MESSAGES)
        return reply.choices[0].message.content


def ask():
    try:
        if MODE == "async":
            return asyncio.run(_ask_async())
        client = openai.OpenAI(**OPTIONS)
        if MODE == "stream":
            chunks = client.chat.completions.create(model="gpt-4", messages=MESSAGES, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reply = client.chat.completions.create(model="gpt-4", messages=MESSAGES)
        return reply.choices[0].message.content
    except openai.APIError:  # the product's fallback: the model's failure is swallowed
        return FALLBACK
"""
TESTS = "import pytest, product\n\npytestmark = pytest.mark.slm\n" + "".join(
    f"\ndef test_{n}():\n    assert product.ask()\n" for n in range(1, 6)
)
WAYS = ("plain", "stream", "async", "model_timeout")


def way_of(way: str, wait: float) -> tuple[dict[str, object], str, str]:
    """The product's client options, candidate table lines and a phrase of the failed call's
    error, for a timeout of ``wait`` seconds (the product's own, or the candidate's timeout_s)."""
    caller = {"max_retries": 0, "timeout": wait}  # the product's own client timeout
    return {
        "plain": (caller, "", f"the caller gave up (its own timeout of {wait:.3g} s)"),
        "stream": (caller, "", "the caller "),
        "async": (caller, "", "the caller gave up"),
        "model_timeout": (
            {"max_retries": 0},
            f"timeout_s = {wait}\n",
            f"within {wait:g} s (its timeout_s)",
        ),
    }[way]


@pytest.mark.parametrize("way", WAYS)
def test_a_candidate_that_times_out_fails_the_gate_though_the_product_swallowed_it(
    pytester: pytest.Pytester, way: str
) -> None:
    # 0.5 s on an idle machine; longer as the load is higher (issue 51 item 6: at load 20 the
    # answered fifth request took longer than a fixed 0.5 s, and counted as a timeout too)
    wait = round(0.5 * factor(), 1)
    options, table, phrase = way_of(way, wait)
    mode = way if way in ("stream", "async") else "plain"
    pytester.makepyfile(product=PRODUCT.format(mode=mode, options=options), test_product=TESTS)
    # Four hanging requests, each well past every timeout above; the fifth is answered.
    with FakeOpenAI(
        "Open Settings, then Reset.", fail=["timeout"] * 4, timeout_sleep_s=10 * wait
    ) as fake:
        gate = "[tool.slam.gate]\nallow_not_swapped = true\n"
        write_pyproject(pytester, fake.base_url, extra=table + gate)
        result = pytester.runpytest(
            "-p", "no:cacheprovider", "--slm-report=r.json", "--junitxml=j.xml"
        )  # fmt: skip
        # one request per call at most: nothing was sent twice (on a loaded machine the caller's
        # 0.5 s can end before the server has read a hanging request: it is then not counted)
        assert fake.hits <= 5, fake.hits
    result.assert_outcomes(passed=5)  # the product's assertions decided the pytest outcome
    assert result.ret == EXIT_GATE_FAILED
    text = said(result)
    assert "mini: candidate_failed: timeout: 4 of 5 tests" in text
    assert "not swapped" not in text and "explicit base_url" not in text

    report = read_report(pytester.path / "r.json")
    outcomes = {o["nodeid"].split("::")[1]: o for o in report["outcomes"]}
    assert outcomes["test_5[mini]"]["outcome"] == "passed"
    for n in range(1, 5):
        outcome = outcomes[f"test_{n}[mini]"]
        assert outcome["outcome"] == "candidate_failed"
        [call] = outcome["calls"]  # recorded before the test's outcome was built
        assert call["error_kind"] == "timeout" and phrase in call["error"], call["error"]
        assert call["e2e_ms"] > 0 and call["started_at"]
        assert "1 of 1 call(s) to mini failed (timeout 1)" in outcome["message"]
    row = report["models"][0]
    assert (row["tests_passed"], row["tests_failed"], row["pass_rate"]) == (1, 4, 0.2)
    assert (row["tests_candidate_failed"], row["candidate_failures"]) == (4, {"timeout": 4})
    assert row["tests_not_swapped"] == 0
    gate = report["gate"]
    assert gate["passed"] is False
    [breach] = gate["models"][0]["breaches"]
    assert (breach["rule"], breach["measured"]) == ("candidate_failed", 4)

    cases = {c.get("name"): c for c in ET.parse(pytester.path / "j.xml").iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_1[mini]"].iter("property")}
    assert props["slam_outcome"] == "candidate_failed"
    assert "timeout" in props["slam_candidate_failed"]
    assert cases["test_1[mini]"].find("failure") is None  # the testcase passed its assertions


def test_a_call_the_candidate_answered_after_a_failed_one_does_not_hide_it(
    pytester: pytest.Pytester,
) -> None:
    """The product retries on its own after an error status: the retry's answer passes the
    test's assertions, and the first call still counts against the candidate."""
    pytester.makepyfile(
        product=PRODUCT.format(mode="plain", options={"max_retries": 2}),
        test_product="import pytest, product\n\n@pytest.mark.slm\ndef test_one():\n"
        "    assert product.ask() != product.FALLBACK\n",
    )
    with FakeOpenAI("Open Settings, then Reset.", fail=[503]) as fake:
        write_pyproject(pytester, fake.base_url)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
        assert fake.hits == 2
    result.assert_outcomes(passed=1)
    assert result.ret == EXIT_GATE_FAILED
    assert "mini: candidate_failed: http: 1 of 1 tests" in said(result)
    [outcome] = read_report(pytester.path / "r.json")["outcomes"]
    assert outcome["outcome"] == "candidate_failed"
    assert [c["error_kind"] for c in outcome["calls"]] == ["http", None]
    assert "1 of 2 call(s) to mini failed (http 1)" in outcome["message"]


def test_a_candidate_that_drops_the_connection_gets_one_post_and_fails_the_test(
    pytester: pytest.Pytester,
) -> None:
    """The product said ``max_retries=0``: the hop sends its POST once, never again on its own."""
    pytester.makepyfile(
        product=PRODUCT.format(mode="plain", options={"max_retries": 0}),
        test_product="import pytest, product\n\n@pytest.mark.slm\ndef test_one():\n"
        "    assert product.ask()\n",
    )
    with FakeOpenAI(fail=["timeout"], timeout_sleep_s=0) as dropping:  # reads it, hangs up
        write_pyproject(pytester, dropping.base_url)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
        assert [r.path for r in dropping.requests] == ["/v1/chat/completions"]
    result.assert_outcomes(passed=1)
    assert result.ret == EXIT_GATE_FAILED
    assert "mini: candidate_failed: unreachable: 1 of 1 tests" in said(result)
    [outcome] = read_report(pytester.path / "r.json")["outcomes"]
    [call] = outcome["calls"]
    assert call["error_kind"] == "unreachable" and "RemoteDisconnected" in call["error"]
