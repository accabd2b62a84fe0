"""The JSON report of a fixed run is pinned: a refactor that moves code must leave it byte-equal.

A real pytest run (record, then replay) of a small project against loopback fakes of the reference
and of two candidates, with bands, a judge-free cascade, a structural scorer and a gate, writes
its report; the report, with the fields that measure time or name this machine replaced by
placeholders, must equal ``tests/data/pinned_report.json`` byte for byte.

A change that means to alter the report (a new field, a new figure) regenerates the file with
``SLAM_REPIN=1 pytest tests/test_report_pinned.py`` and shows its diff in review; any other diff
is a regression of the move.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

PINNED = Path(__file__).parents[1] / "data" / "pinned_report.json"

# Keys whose values measure time, the machine or the concurrency a call met (how many were in
# flight, whether its answer was fetched before its test asked); their values become "<varies>".
VARIES = re.compile(
    r"(_ms|_s|_cv|_at|^started|^finished|^generated_at|tokens_per_s|^distributions|_version"
    r"|^energy.*|^elapsed.*|^duration.*|^ts|^timestamp|^when|^gpu_telemetry|^digest"
    r"|^in_flight.*|^waited_for|^fetched_ahead)$"
)

PRODUCT = """
import json
from openai import OpenAI

client = OpenAI()

def ask(question):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    return r.choices[0].message.content

def ticket(text):
    r = client.chat.completions.create(
        model="gpt-4", temperature=0, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "JSON for: " + text}])
    return json.loads(r.choices[0].message.content)
"""

TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

QUESTIONS = ["refund for order 1182", "reset my password", "change my email",
             "cancel my plan", "invoice for March", "delete my account"]

@pytest.mark.parametrize("q", QUESTIONS)
def test_answer(q):
    assert product.ask("How do I " + q + "?")

@pytest.mark.slm_equivalence(by="json")
def test_ticket():
    assert product.ticket("printer on fire")["priority"]

def test_fails_for_short_answers():
    assert len(product.ask("Say hello.")) > 20
"""

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["close", "far"]
reference = "{ref}#gpt-4"

[tool.slam.equivalence]
by = "fuzzy"
at_least = 0.8
fail_below = 0.3

[tool.slam.models.close]
base_url = "{close}"
model = "close-1"
input_per_mtok = 0.1
output_per_mtok = 0.2

[tool.slam.models.far]
base_url = "{far}"
model = "far-1"
input_per_mtok = 0.05
output_per_mtok = 0.1

[tool.slam.gate]
min_pass_rate = 0.9
"""


def _answer(style: str):
    def answer(req: dict[str, Any]) -> str:
        text = req["messages"][-1]["content"]
        if text.startswith("JSON for:"):
            priority = {"ref": "high", "close": "high", "far": "low"}[style]
            return json.dumps({"priority": priority, "topic": "printer"})
        if text == "Say hello.":
            return "Hello there, how can I help you today?" if style != "far" else "Hi."
        if style == "far":
            return "Please contact support."
        if style == "close" and "account" in text:
            return "Open settings, then privacy, and remove it for good."
        return f"To {text[9:-1]}, open your account settings and follow the steps there."

    return answer


def _normalized(value: Any, root: str, key: str = "") -> Any:
    if key and VARIES.search(key):
        return "<varies>"
    if isinstance(value, dict):
        return {k: _normalized(v, root, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v, root) for v in value]
    if isinstance(value, str):
        value = value.replace(root, "<root>")
        # the price snapshot installed names its release: a new one must not read as a change
        value = re.sub(r"genai-prices \S+ snapshot", "genai-prices <version> snapshot", value)
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", value)
    return value


def test_the_report_of_a_fixed_run_is_pinned(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLAM_RUN_ID", "pinned")  # visits.run: not the CI's run id or commit
    with (
        FakeOpenAI(_answer("ref")) as ref,
        FakeOpenAI(_answer("close")) as close,
        FakeOpenAI(_answer("far")) as far,
    ):
        pytester.makepyprojecttoml(
            PYPROJECT.format(ref=ref.base_url, close=close.base_url, far=far.base_url)
        )
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        recorded = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-record=new")
        assert (pytester.path / "__slam__").is_dir(), recorded.stdout.str()[-3000:]
        done = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--slm-report=run.json", "-p", "no:randomly"
        )
    assert done.ret == 1, done.stdout.str()[-3000:]  # a test failed; the gate fails both
    report = read_report(pytester.path / "run.json")  # each field at its default filled in
    text = json.dumps(_normalized(report, str(pytester.path)), indent=1, sort_keys=True) + "\n"
    if os.environ.get("SLAM_REPIN"):
        PINNED.parent.mkdir(exist_ok=True)
        PINNED.write_text(text, encoding="utf-8")
    assert text == PINNED.read_text(encoding="utf-8"), "report changed; see the module docstring"
