"""Property: any text a model can send (Hypothesis ``text()`` with lone surrogates, NULs, bidi and
other controls) survives every surface: the golden store (write, read back), the JSON report
(write, read, ``slam report render``, ``slam report merge``, ``slam rescore``), the HTML data and
the merge, losslessly where it is stored and as a visible marker where it is shown.

"Losslessly" is as JSON defines a string: two halves of a surrogate pair that arrive apart read
back as the character they form (``textcodec.joined``); every lone half is kept exactly.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import report_helpers as synth
from html_helpers import report_data, sides
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_slam.cli import main
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord, Outcome
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.html import render_html
from pytest_slam.report.jsonreport import load_report, write_json
from pytest_slam.report.junit_xml import junit_xml
from pytest_slam.report.merge import merge
from pytest_slam.report.visits import Visits
from pytest_slam.util import textcodec

HOSTILE = (
    '\ufffe\ud800\udbff\udc00\udfff\ud83d\ude00\x00\x1b\u202e\u202c\u2066\u200f\u2028\ufeff\x85\\"'
)
# Every code point, surrogates included (codec=None), with the hostile ones made likely.
TEXTS = st.text(
    alphabet=st.one_of(
        st.characters(codec=None, categories=["L", "N", "P", "Z", "Cc", "Cf", "Cs", "So"]),
        st.sampled_from(HOSTILE),
    ),
    max_size=40,
)
MODULE = "tests/test_support.py"
HOSTILE_ID = f"tests/test_support.py::test_triage[{synth.SMOL}]"
PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        yield Path(folder)


@given(TEXTS)
@PROPERTY
def test_the_codec_writes_utf8_that_reads_back_to_the_text(text: str) -> None:
    for hidden in (True, False):
        written = textcodec.dumps({text: [text]}, hidden=hidden)
        written.encode("utf-8")  # never a UnicodeEncodeError
        assert json.loads(written) == {textcodec.joined([text]): [textcodec.joined([text])]}
    shown = textcodec.visible(text)
    shown.encode("utf-8")
    assert not set(shown) & set(HOSTILE.replace("\\", "").replace('"', ""))


@given(TEXTS, TEXTS)
@PROPERTY
def test_the_golden_store_keeps_any_answer_and_its_neighbour(prompt: str, answer: str) -> None:
    with scratch() as root:
        request = {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}]}
        hostile = GoldenRecord(
            key=request_key(request), request=request, answers=[GoldenAnswer(text=answer)]
        )
        plain_request = {"model": "gpt-4", "messages": [{"role": "user", "content": "plain"}]}
        plain = GoldenRecord(
            key=request_key(plain_request), request=plain_request, answers=[GoldenAnswer("kept")]
        )
        store = GoldenStore(root / "golden", "openai:gpt-4")
        if hostile.key != plain.key:
            store.record(MODULE, hostile, "t::hostile")
        store.record(MODULE, plain, "t::plain")
        [path] = store.flush()
        path.read_bytes().decode("utf-8")  # a committed file is always UTF-8
        again = GoldenStore(root / "golden", "openai:gpt-4")
        kept = again.lookup(MODULE, plain.key)
        assert kept is not None and kept.answers[0].text == "kept"
        if hostile.key != plain.key:
            back = again.lookup(MODULE, hostile.key)
            assert back is not None
            assert back.answers[0].text == textcodec.joined([answer])
            assert back.request["messages"][0]["content"] == textcodec.joined([prompt])  # type: ignore[index]
            # the key a replay computes from the request it reads back is the recorded one
            assert request_key(back.request) == hostile.key


def _outcomes(text: str) -> list[dict[str, Any]]:
    """The synthetic run, with ``text`` as one candidate answer, its golden answer and a message
    (of the outcome ``HOSTILE_ID``)."""
    outcomes = synth.outcomes()
    first = next(o for o in outcomes if o["nodeid"] == HOSTILE_ID)
    first["calls"][0]["text"] = text
    first["pairs"][0]["reference_text"] = text
    first["message"] = text
    first["outcome"] = "failed"  # its message is a JUnit failure's too
    return outcomes


def _hostile(outcomes: list[Outcome]) -> Outcome:
    return next(o for o in outcomes if o.nodeid == HOSTILE_ID)


@given(text=TEXTS)
@settings(PROPERTY, max_examples=12)  # each example writes, reads and renders a report 3 times
def test_the_report_render_merge_and_rescore_keep_any_answer(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    want = textcodec.joined([text])
    with scratch() as root:
        outcomes = _outcomes(text)
        verdict = aggregate(outcomes, synth.run_info())
        ran = sorted(
            {o["nodeid"] for o in outcomes}
        )  # a run that selected what it ran (merge checks)
        write_json(
            root / "run.json", verdict, outcomes, Visits(complete=True, collected=ran, selected=ran)
        )
        report = load_report(root / "run.json")
        first = _hostile(report.outcomes)
        assert first.calls[0].text == want and first.pairs[0].reference_text == want
        assert first.message == want

        merged = merge([report])
        write_json(root / "merged.json", merged.verdict, merged.outcomes)
        again = _hostile(load_report(root / "merged.json").outcomes)
        assert again.calls[0].text == want and again.pairs[0].reference_text == want

        page = render_html(report.verdict, report.outcomes)
        page.encode("utf-8")
        rows, pairs = report_data(page)
        [row] = [r for r in rows["rows"] if r[8] == HOSTILE_ID]
        assert row[4] == textcodec.visible(want)  # the message, as shown
        shown_pair = (textcodec.visible(want), textcodec.visible(want))  # the answers, as shown
        assert shown_pair in [sides(p) for p in pairs if p[0] == "k_triage"]
        shown = json.dumps([rows, pairs], ensure_ascii=False)
        assert not set(shown) & set(
            "\ud800\udbff\udc00\udfff\x00\x1b\u202e\u202c\u2066\u200f\ufffe"
        )

        xml = ET.fromstring(junit_xml(report.outcomes))  # well-formed XML, whatever the text
        [case] = [c for c in xml.iter("testcase") if c.get("name") == HOSTILE_ID.split("::")[1]]
        assert [f.get("message") for f in case.iter("failure")] == [
            textcodec.visible(want or "failed")
        ]

        for argv in (
            ["report", "render", "run.json", "-o", "run.html"],
            ["report", "merge", "run.json", "--unsigned", "-o", "cli-merged.json"],
            ["rescore", "run.json", "-o", "rescored.json"],
        ):
            status = main(argv)
            out, err = capsys.readouterr()
            assert status in (0, 1) and "Traceback" not in err, (argv, out, err)  # 1: the gate
        assert (root / "run.html").stat().st_size > 0
        for name in ("cli-merged.json", "rescored.json"):
            got = _hostile(load_report(root / name).outcomes)
            assert got.calls[0].text == want and got.pairs[0].reference_text == want


def test_a_golden_file_written_before_reads_as_it_did_and_is_rewritten_escaped(
    tmp_path: Path,
) -> None:
    """A file an older pytest-slam wrote, with a raw U+202E in an answer (its only form then),
    reads back to the same answer; the next write escapes it (``\\u202e``), same value."""
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": "q"}]}
    key = request_key(request)
    entry = {"request": request, "answers": [{"text": "left \u202eright"}]}
    old = json.dumps(
        {"schema": "pytest-slam/golden/1", "reference": "openai:gpt-4", "entries": {key: entry}},
        indent=2,
        ensure_ascii=False,
    )
    path = tmp_path / "golden" / "openai-gpt-4" / "tests" / "test_support.json"
    path.parent.mkdir(parents=True)
    path.write_text(old + "\n", encoding="utf-8")
    store = GoldenStore(tmp_path / "golden", "openai:gpt-4")
    found = store.lookup(MODULE, key)
    assert found is not None and found.answers[0].text == "left \u202eright"
    plain = {"model": "gpt-4", "messages": [{"role": "user", "content": "other"}]}
    store.record(MODULE, GoldenRecord(request_key(plain), plain, [GoldenAnswer("x")]), "t::x")
    store.flush()
    text = path.read_text(encoding="utf-8")
    assert "left \\u202eright" in text and "\u202e" not in text
    again = GoldenStore(tmp_path / "golden", "openai:gpt-4").lookup(MODULE, key)
    assert again is not None and again.answers[0].text == "left \u202eright"


@given(text=TEXTS)
@PROPERTY
def test_the_review_page_shows_any_answer_as_markers(text: str) -> None:
    """The blind review page (its HTML, encoded as the server sends it) holds no hidden control."""
    from pytest_slam.review.page import render_page
    from pytest_slam.review.pairs import ReviewPair

    pair = ReviewPair("tests/test_x.py", "k1", "mini", [{"role": "user", "text": text}], text, text)
    page = render_page([pair], 0, 1, "nonce")
    page.encode("utf-8")  # what the review server sends
    assert not set(page) & set("\ud800\udbff\udc00\udfff\x00\x1b\u202e\u202c\u2066\u200f\ufffe")
