"""Any text a model can send survives a run: a lone UTF-16 surrogate (valid JSON ``"\\ud800"``), a
NUL and a bidi override in an answer, from the candidate or in the reference's recorded answer,
record and replay. The run ends with its summary and gate line, writes its HTML, keeps every other
golden answer of the module, and ``slam report render/merge`` and ``slam rescore`` take its report.
The loopback FakeOpenAI sends the text as the API does: a JSON escape in the response body.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from html_helpers import chromium, report_data, sides
from report_helpers import read_report
from slam_helpers import MINI_PYPROJECT, PRODUCT, needs_chromium, said

from pytest_slam.cli import main
from pytest_slam.testing import FakeOpenAI

HOSTILE = "ok \ud800 then\x00 \u202eevil\u202c end"  # lone surrogate, NUL, RLO...PDF
QUESTIONS = ("first", "second", "third")
TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_first():
    assert product.ask("first")

def test_second():
    assert product.ask("second")

def test_third():
    assert product.ask("third")
"""
GOLDEN = Path("__slam__/gpt-4/test_product.json")


def _answers(hostile: bool) -> Any:
    def answer(request: dict[str, Any]) -> str:
        question = request["messages"][-1]["content"]
        return HOSTILE if hostile and question == "second" else f"GPT-4 says: {question}"

    return answer


@pytest.fixture(params=["candidate", "reference"])
def project(request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: Any) -> Any:
    """A three-test module whose second answer is HOSTILE, from the role under test."""
    monkeypatch.setenv("COLUMNS", "200")
    role = request.param
    with (
        FakeOpenAI(_answers(role == "reference")) as reference,
        FakeOpenAI(_answers(role == "candidate"), model="gpt-4o-mini-2024-07-18") as candidate,
    ):
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=reference.base_url, candidate=candidate.base_url))  # fmt: skip
        yield pytester, role


def _run(pytester: pytest.Pytester, name: str, *args: str) -> pytest.RunResult:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--slm-report={name}.json", f"--slm-html={name}.html", *args
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert "pytest-slam swap verdict: 1 model(s) vs gpt-4" in said(result)
    result.stdout.fnmatch_lines(["pytest-slam gate: *"])
    assert "\u202e" not in out  # the terminal never prints the override itself
    assert (pytester.path / f"{name}.html").stat().st_size > 0
    return result


def _texts(report: Path) -> tuple[dict[str, str], dict[str, str | None]]:
    """Each test's candidate answer and the reference answer paired with it, from the report."""
    doc = read_report(report)
    calls = {o["test"].split("::")[1]: o["calls"][0]["text"] for o in doc["outcomes"]}
    pairs = {o["test"].split("::")[1]: o["pairs"][0]["reference_text"] for o in doc["outcomes"]}
    return calls, pairs


def _golden(pytester: pytest.Pytester) -> dict[str, str]:
    """The golden file's answers by question, read by a plain JSON reader."""
    doc = read_report(pytester.path / GOLDEN)
    return {
        e["request"]["messages"][-1]["content"]: e["answers"][0]["text"]
        for e in doc["entries"].values()
    }


def _slam(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out + err


def test_a_lone_surrogate_survives_record_replay_and_every_report_command(
    project: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester, role = project
    _run(pytester, "record", "--slm-record=new")
    golden_bytes = (pytester.path / GOLDEN).read_bytes()
    golden_bytes.decode("utf-8")  # the committed file is valid UTF-8...
    assert b"\\ud800" in golden_bytes if role == "reference" else b"\\ud800" not in golden_bytes
    expected = {q: f"GPT-4 says: {q}" for q in QUESTIONS}
    if role == "reference":
        expected["second"] = HOSTILE  # ...and reads back to the very answer, lossless
    assert _golden(pytester) == expected  # every other golden of the module kept

    _run(pytester, "replay")
    assert (pytester.path / GOLDEN).read_bytes() == golden_bytes  # a replay rewrites nothing
    calls, refs = _texts(pytester.path / "replay.json")
    assert refs == {f"test_{q}": text for q, text in expected.items()}
    want = HOSTILE if role == "candidate" else "GPT-4 says: second"
    assert calls["test_second"] == want and calls["test_first"] == "GPT-4 says: first"

    capsys.readouterr()
    status, out = _slam(capsys, "report", "render", "replay.json", "-o", "rendered.html")
    assert status == 0, out
    status, out = _slam(capsys, "report", "merge", "replay.json", "--unsigned", "-o", "merged.json")
    assert status == 0, out
    assert _texts(pytester.path / "merged.json") == (calls, refs)
    status, out = _slam(capsys, "rescore", "replay.json", "-o", "rescored.json")
    assert status == 0, out
    assert _texts(pytester.path / "rescored.json") == (calls, refs)

    _, pairs = report_data((pytester.path / "rendered.html").read_text(encoding="utf-8"))
    shown = json.dumps(pairs, ensure_ascii=False)
    assert "\u202e" not in shown and "\ud800" not in shown and "\x00" not in shown
    assert "ok \u27e8U+D800\u27e9 then\u27e8U+0000\u27e9 \u27e8U+202E\u27e9evil" in shown


def test_a_split_emoji_from_a_stream_is_stored_and_read_as_the_emoji() -> None:
    """Two halves of a surrogate pair in two SSE chunks are one character once accumulated."""
    from pytest_slam.swap.chat import Accumulator

    acc = Accumulator(0.0)
    for half in ("smile \ud83d", "\ude00!"):
        acc.feed({"choices": [{"index": 0, "delta": {"content": half}}]}, 1.0)
    assert acc.text() == "smile \U0001f600!"


@needs_chromium
def test_a_bidi_override_in_an_answer_is_shown_as_a_marker_in_chromium(
    pytester: pytest.Pytester, monkeypatch: Any, tmp_path: Path
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with (
        FakeOpenAI(_answers(False)) as reference,
        FakeOpenAI(_answers(True), model="gpt-4o-mini-2024-07-18") as candidate,
    ):
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=reference.base_url, candidate=candidate.base_url))  # fmt: skip
        _run(pytester, "run", "--slm-record=new")
    page = pytester.path / "run.html"
    dom = chromium(f"{page.as_uri()}#open=all", "--dump-dom", tmp_path=tmp_path)
    assert "\u27e8U+202E\u27e9evil\u27e8U+202C\u27e9" in dom  # the override is a visible marker
    assert "\u202e" not in dom and "\u202c" not in dom  # never a character the page applies


STREAMED = """
from openai import OpenAI

client = OpenAI()

def ask(question):
    stream = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
"""


def test_an_emoji_split_across_two_stream_chunks_is_recorded_as_the_emoji(
    pytester: pytest.Pytester, fake_gpt4: Any, monkeypatch: Any
) -> None:
    """The fake streams each UTF-16 half in its own chunk (``"\\ud83d"``, then ``"\\ude00"``), as a
    proxy that splits on code units does: the call's text is the emoji, not two halves."""
    monkeypatch.setenv("COLUMNS", "200")
    with FakeOpenAI("smile \ud83d\ude00!", model="gpt-4o-mini-2024-07-18") as candidate:
        pytester.makepyfile(product=STREAMED, test_product=TESTS)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url))  # fmt: skip
        _run(pytester, "run", "--slm-record=new")
        chunks = [r for r in candidate.requests if r.json and r.json.get("stream")]
    assert chunks  # the candidate was asked to stream
    calls, _ = _texts(pytester.path / "run.json")
    assert calls == dict.fromkeys(("test_first", "test_second", "test_third"), "smile \U0001f600!")


BROKEN = (  # "\x" is no JSON escape: the body is not JSON
    b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": '
    b'{"role": "assistant", "content": "bad \\x escape"}, "finish_reason": "stop"}]}'
)


@pytest.mark.parametrize("role", ["candidate", "reference"])
def test_an_answer_that_is_not_json_fails_its_call_and_keeps_its_neighbours(
    pytester: pytest.Pytester, monkeypatch: Any, role: str
) -> None:
    """An invalid JSON escape (``"\\x"``) in a response body: that one call fails with a line
    naming it, the run ends with its summary and gate line, the other answers are recorded."""
    monkeypatch.setenv("COLUMNS", "200")

    def answer(broken: bool) -> Any:
        def reply(request: dict[str, Any]) -> str | bytes:
            question = request["messages"][-1]["content"]
            return BROKEN if broken and question == "second" else f"GPT-4 says: {question}"

        return reply

    with (
        FakeOpenAI(answer(role == "reference")) as reference,
        FakeOpenAI(answer(role == "candidate"), model="gpt-4o-mini-2024-07-18") as candidate,
    ):
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        pyproject = MINI_PYPROJECT.replace("[tool.slam]\n", "[tool.slam]\nreference_retries = 0\n")
        pytester.makefile(".toml", pyproject=pyproject.format(
            reference=reference.base_url, candidate=candidate.base_url))  # fmt: skip
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new",
                                    "--slm-report=run.json", "--slm-html=run.html")  # fmt: skip
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert "pytest-slam swap verdict: 1 model(s) vs gpt-4" in said(result)
    result.stdout.fnmatch_lines(["pytest-slam gate: *"])
    assert (pytester.path / "run.html").stat().st_size > 0
    golden = _golden(pytester)
    assert golden["first"] == "GPT-4 says: first" and golden["third"] == "GPT-4 says: third"
    assert "second" not in golden or golden["second"] == "GPT-4 says: second"
    doc = read_report(pytester.path / "run.json")
    second = next(o for o in doc["outcomes"] if o["test"].endswith("::test_second"))
    assert second["outcome"] == "failed"
    assert "neither an SSE stream nor a chat completion" in second["message"]
    assert ("recording from reference" in second["message"]) == (role == "reference")


def test_a_huge_answer_is_kept_whole(
    pytester: pytest.Pytester, fake_gpt4: Any, monkeypatch: Any
) -> None:
    """A quarter-megabyte reference answer (40,000 tokens) is recorded, reported and rendered
    whole, beside its neighbours; the candidate's, under the generation cap, is cut there."""
    monkeypatch.setenv("COLUMNS", "200")
    huge = "".join(f"word{i % 997} " for i in range(40_000))

    def answer(request: dict[str, Any]) -> str:
        question = request["messages"][-1]["content"]
        return huge if question == "second" else f"GPT-4 says: {question}"

    with (
        FakeOpenAI(answer) as reference,
        FakeOpenAI(huge, model="gpt-4o-mini-2024-07-18") as candidate,
    ):
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=reference.base_url, candidate=candidate.base_url))  # fmt: skip
        _run(pytester, "run", "--slm-record=new")
    assert _golden(pytester) == {"first": "GPT-4 says: first", "second": huge,
                                 "third": "GPT-4 says: third"}  # fmt: skip
    calls, refs = _texts(pytester.path / "run.json")
    assert refs["test_second"] == huge and huge.startswith(calls["test_second"].rstrip())
    _, pairs = report_data((pytester.path / "run.html").read_text(encoding="utf-8"))
    # the page shows a long answer's start and says, visibly, how much it left out
    shown = [(sides(p)[0] or "").replace("<del>", "").replace("</del>", "") for p in pairs]
    [cut] = [ref for ref in shown if ref.startswith("word0 ")]
    head, count = re.fullmatch(
        r"(.*) \[\.\.\. (\d+) more characters not shown\]", cut, re.S
    ).groups()
    assert huge.startswith(head) and len(head) + int(count) == len(huge), (len(head), count)


ASSERTING = """
import pytest, product
from pytest_slam import assert_equivalent

pytestmark = pytest.mark.slm

def test_second():
    assert_equivalent(product.ask("second"), "GPT-4 says: second", at_least=0.99)
"""


def test_a_failure_message_shows_the_hostile_answer_as_markers_on_a_real_terminal(
    pytester: pytest.Pytester, fake_gpt4: Any, monkeypatch: Any
) -> None:
    """In a subprocess (stdout a real UTF-8 pipe, as in CI), ``assert_equivalent`` fails on the
    hostile answer with its markers: no encoding crash, no override or escape reaches the log,
    and the obtained answer is written (a lone surrogate as U+FFFD, a text file's replacement)."""
    monkeypatch.setenv("COLUMNS", "200")
    with FakeOpenAI(HOSTILE + " \x1b[2J", model="gpt-4o-mini-2024-07-18") as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=ASSERTING)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url))  # fmt: skip
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-record=new")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert "candidate is not equivalent to the reference by fuzzy" in out
    assert (
        "\u27e8U+D800\u27e9" in out and "\u27e8U+202E\u27e9" in out and "\u27e8U+001B\u27e9" in out
    )
    assert "\u202e" not in out and "\x1b[2J" not in out
    result.stdout.fnmatch_lines(["pytest-slam gate: *"])
    [obtained] = (pytester.path / "__slam__").rglob("*.obtained/*.txt")
    assert obtained.read_text(encoding="utf-8").startswith("ok \ufffd then\x00 \u202eevil")
