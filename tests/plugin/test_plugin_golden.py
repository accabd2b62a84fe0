"""The golden cache of the reference's answers end to end: record, replay, refresh, the fixture.

Real pytest runs (pytester) of a small product suite. The hosted GPT-4 reference is a FakeOpenAI on
loopback, named by its endpoint spec as a user would (``http://127.0.0.1:PORT/v1#gpt-4``); the
candidate is a second FakeOpenAI, so an inner run takes about a second. Replays run with the
reference stopped: nothing can reach it, so a replay that passes read everything from the files.
Their project and readers are in ``plugin_golden_helpers.py``, shared with the other
``test_plugin_golden_*`` files.
"""

from __future__ import annotations

import hashlib
import json

from plugin_golden_helpers import (
    GOLDEN,
    PRODUCT,
    QUESTIONS,
    SUITE,
    by_test,
    entries,
    golden_files,
    make_suite,
    run,
    slam,
    write_project,
)

from pytest_slam.golden.fileformat import read_golden
from pytest_slam.testing import FakeOpenAI


def test_recorded_suite_replays_the_same_with_the_reference_stopped(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    recorded = run(pytester, "--slm-record=new", "--slm-report=recorded.json")
    recorded.assert_outcomes(passed=3)
    assert fake_gpt4.hits == 3  # one real reference call per distinct request, none repeated
    recorded.stdout.fnmatch_lines([f"golden answers written: {GOLDEN}/test_product.json"])
    files = golden_files(pytester.path)
    fake_gpt4.stop()

    replayed = run(pytester, "--slm-report=replayed.json")
    replayed.assert_outcomes(passed=3)
    before, after = (
        by_test(pytester.path / "recorded.json"),
        by_test(pytester.path / "replayed.json"),
    )
    assert after == before
    assert sorted(text for _, pairs in after.values() for _, text in pairs) == sorted(
        "GPT-4 says: " + q for q in QUESTIONS
    )
    assert golden_files(pytester.path) == files  # a replay never writes a golden file


def test_replay_misses_fail_with_the_command_that_records_them(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    result = run(pytester)
    result.assert_outcomes(failed=3)
    command = "pytest --slm-record=new 'test_product.py::test_answer[mini-How do I get a refund?]'"
    out = result.stdout.str()
    assert "no golden answer of reference 'gpt-4' for this request" in out
    assert f"Record it from the real reference with: {command}" in out
    assert fake_gpt4.hits == 0 and not (pytester.path / "__slam__").exists()


SHARED_SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("i", range(10))
def test_ask(i):
    assert product.ask("module {m} question %d" % i)
"""


def test_four_workers_record_40_requests_and_a_refresh_gives_the_same_bytes(
    pytester, fake_gpt4, mini
):
    # Four workers append to the same four golden files at once; 10 requests a module interleave
    # their writes as 50 did (200 made this the suite's slowest test: 46 s on 2 cores).
    pytester.makepyfile(
        product=PRODUCT, **{f"test_m{m}": SHARED_SUITE.format(m=m) for m in range(4)}
    )
    write_project(pytester, fake_gpt4, mini)
    snapshots = []
    for refresh in ("--slm-record=all", "--slm-refresh-golden"):  # the same mode, two spellings
        run(pytester, "-n", "4", refresh).assert_outcomes(passed=40)
        snapshots.append(golden_files(pytester.path))
    assert fake_gpt4.hits == 80  # each run asked the reference once per request
    assert sorted(snapshots[0]) == [f"gpt-4/test_m{m}.json" for m in range(4)]  # no temp files
    for m in range(4):
        golden = read_golden(pytester.path / GOLDEN / f"test_m{m}.json", "gpt-4")
        texts = sorted(rec.answers[0].text for rec in golden.entries.values())
        assert texts == sorted(f"GPT-4 says: module {m} question {i}" for i in range(10))
    digest = {name: hashlib.sha256(data).hexdigest() for name, data in snapshots[1].items()}
    assert digest == {name: hashlib.sha256(data).hexdigest() for name, data in snapshots[0].items()}


def test_slam_golden_refresh_rewrites_only_the_answers_that_changed(pytester, mini):
    answers = {"How do I get a refund?": "Open Orders, then Refund."}
    reply = lambda req: answers.get(req["messages"][-1]["content"], "Same as before.")  # noqa: E731
    with FakeOpenAI(reply, latency_s=0.01) as reference:
        make_suite(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
        path = pytester.path / GOLDEN / "test_product.json"
        first = entries(path)
        answers["How do I get a refund?"] = "Refunds moved to Billing."
        refreshed = slam(pytester, "golden", "refresh", "-p", "no:cacheprovider")
        assert refreshed.returncode == 0, refreshed.stdout
        assert reference.hits == 6  # all three asked again; the two unchanged answers kept as is
    second = entries(path)
    changed = [key for key in first if first[key] != second[key]]
    assert [second[key]["answers"][0]["text"] for key in changed] == ["Refunds moved to Billing."]
    (answer,) = second[changed[0]]["answers"]
    assert answer["e2e_ms"] == round(answer["e2e_ms"], 1)  # latency kept to 0.1 ms: no diff noise


def test_samples_are_recorded_and_files_are_grouped_by_reference_and_module(pytester, mini):
    count = iter(range(1000))
    reply = lambda req: f"sample {next(count)}: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(reply) as reference:
        pytester.makepyfile(product=PRODUCT)
        (pytester.path / "tests").mkdir()
        (pytester.path / "tests" / "test_triage.py").write_text(
            SUITE.format(questions=QUESTIONS[:2])
        )
        write_project(pytester, reference, mini)
        result = run(pytester, "--slm-record=new", "--slm-samples=3", "--slm-report=r.json")
        result.assert_outcomes(passed=2)
    assert list(golden_files(pytester.path)) == ["gpt-4/tests/test_triage.json"]
    path = pytester.path / GOLDEN / "tests" / "test_triage.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert list(doc) == ["schema", "reference", "entries"] and doc["reference"] == "gpt-4"
    assert list(doc["entries"]) == sorted(doc["entries"])
    for entry in doc["entries"].values():
        question = entry["request"]["messages"][0]["content"]
        assert entry["request"] == {"messages": [{"content": question, "role": "user"}],
                                    "model": "gpt-4", "temperature": 0.0}  # fmt: skip
        assert entry["tests"] == [f"tests/test_triage.py::test_answer[{question}]"]
        texts = [a["text"] for a in entry["answers"]]
        assert len(texts) == 3 and len(set(texts)) == 3 and all(question in t for t in texts)
    first_samples = {e["answers"][0]["text"] for e in doc["entries"].values()}
    used = {text for _, pairs in by_test(pytester.path / "r.json").values() for _, text in pairs}
    assert used == first_samples  # the candidate is compared with the first sample


FIXTURE_PRODUCT = """
def summarize(client, text):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": text}], temperature=0)
    return r.choices[0].message.content

async def summarize_async(client, text):
    r = await client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": text}], temperature=0)
    return r.choices[0].message.content
"""
FIXTURE_TESTS = """
import asyncio
import openai, pytest, product

def test_same_code_path(slm_model, gpt4_reference):
    mine = product.summarize(slm_model.client, "Summarize: refund policy")
    theirs = product.summarize(gpt4_reference.client, "Summarize: refund policy")
    assert (mine, theirs) == ("mini says: Summarize: refund policy",
                              "GPT-4 says: Summarize: refund policy")
    (call,) = slm_model.calls
    assert gpt4_reference.answer_for(call).answers[0].text == theirs
    assert gpt4_reference.text_for(call) == theirs

def test_async_clients(slm_model, gpt4_reference):
    async def both():
        return (await product.summarize_async(slm_model.async_client, "async q"),
                await product.summarize_async(gpt4_reference.async_client, "async q"))
    assert asyncio.run(both()) == ("mini says: async q", "GPT-4 says: async q")

def test_chat_and_streaming(gpt4_reference):
    call = gpt4_reference.chat("Say hi", system="Be brief")
    assert (call.text, call.role) == ("GPT-4 says: Say hi", "reference")
    stream = gpt4_reference.client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "stream q"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == \\
        "GPT-4 says: stream q"
"""
MISS_TEST = """
import openai, pytest

def test_unrecorded(gpt4_reference):
    with pytest.raises(openai.NotFoundError) as err:
        gpt4_reference.chat("never recorded")
    assert "pytest --slm-record=new 'test_miss.py::test_unrecorded[mini]'" in str(err.value)
"""


def test_gpt4_reference_fixture_records_then_replays(pytester, fake_gpt4, mini):
    pytester.makepyfile(product=FIXTURE_PRODUCT, test_fixture=FIXTURE_TESTS)
    write_project(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    recorded = golden_files(pytester.path)
    assert len(entries(pytester.path / GOLDEN / "test_fixture.json")) == 4
    fake_gpt4.stop()
    pytester.makepyfile(test_miss=MISS_TEST)
    run(pytester).assert_outcomes(passed=4)
    assert golden_files(pytester.path) == recorded


SECRET = "sk-slam-test-SECRET-0123456789abcdef"  # recognisable, and shaped like an OpenAI key


def test_no_secret_is_written_to_any_file(pytester, mini, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    reply = lambda req: "GPT-4 says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(reply, api_key=SECRET) as reference:  # answers only with the key
        pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
        write_project(pytester, reference, mini, key_env="OPENAI_API_KEY")
        outputs = [
            "--slm-report=out/report.json",
            "--slm-html=out/report.html",
            "--junitxml=out/junit.xml",
            "--log-file=out/pytest.log",
            "--log-level=DEBUG",
        ]
        run(pytester, "-n", "2", "--slm-record=new", *outputs).assert_outcomes(passed=3)
        assert {r.headers["authorization"] for r in reference.requests} == {f"Bearer {SECRET}"}
    written = [p for p in sorted(pytester.path.rglob("*")) if p.is_file()]
    names = {p.relative_to(pytester.path).as_posix() for p in written}
    assert {"__slam__/gpt-4/test_product.json", "out/report.json", "out/report.html",
            "out/junit.xml", "out/pytest.log"} <= names  # fmt: skip
    assert [p for p in written if SECRET.encode() in p.read_bytes()] == []
