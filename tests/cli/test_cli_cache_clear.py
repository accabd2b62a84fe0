"""``slam cache clear`` (cli/cache_cmd.py) clears everything pytest-slam keeps between runs in
``.slam``, and says what, one line each in the same words: the candidates' kept answers, a
refresh's paid and unrecorded reference answers (golden/paid.py) and the notes of golden requests
that missed (golden/misses.py). It cleared the first only (issue 52): a killed refresh's answers
were reused by the next refresh, and a noted request stayed unfetched, whatever the user cleared.

The kept things are written by the real writers (``Paid.keep``, ``misses.note``, a golden store);
the command is the console script's entry point.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_slam.cli import main
from pytest_slam.golden import misses
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.paid import Paid
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import Call, GoldenAnswer, GoldenRecord, ModelSpec

SPEC = ModelSpec("gpt-4", "openai", "gpt-4", base_urls=["http://127.0.0.1:9/v1"])


def _body(question: str) -> dict[str, object]:
    return {"model": "gpt-4", "temperature": 0, "messages": [{"role": "user", "content": question}]}


def _kept(root: Path) -> None:
    """Two paid answers, one missed-request note and one kept candidate answer."""
    golden = root / "__slam__"
    for question in ("q1", "q2"):
        Paid(golden, SPEC).keep(_body(question), Call("gpt-4", "reference", {}, text=question))
    store = GoldenStore(golden, "gpt-4")
    rec = GoldenRecord(key=request_key(_body("q1")), request=_body("q1"), answers=[GoldenAnswer("a1")],
                       tests=["test_a"], turns={"test_a": [1]})  # fmt: skip
    store.record("test_a.py", rec, "test_a")
    store.flush()
    misses.note(store, "test_a.py", "test_a", 1, _body("q1 at 09:05"))
    cache = root / ".slam" / "cache" / "ab"
    cache.mkdir(parents=True)
    (cache / "ab12.json").write_text("{}", encoding="utf-8")


def _left(root: Path, folder: str) -> list[Path]:
    return [p for p in (root / ".slam" / folder).glob("*") if p.name != ".gitignore"]


def test_clear_removes_the_paid_answers_and_missed_notes_too_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _kept(tmp_path)
    assert len(_left(tmp_path, "paid")) == 2 and len(_left(tmp_path, "missed")) == 1
    monkeypatch.chdir(tmp_path)
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "answer cache: 1 answer removed from .slam/cache"
    assert out[1].startswith("paid reference answers: 2 answers removed from .slam/paid (")
    assert out[2].startswith("missed golden requests: 1 note removed from .slam/missed (")
    assert _left(tmp_path, "paid") == [] and _left(tmp_path, "missed") == []
    assert list((tmp_path / ".slam" / "cache").glob("*/*.json")) == []


def test_clear_with_an_option_clears_only_what_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _kept(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["cache", "clear", "--paid"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("paid reference answers: 2 answers removed")
    assert _left(tmp_path, "paid") == [] and len(_left(tmp_path, "missed")) == 1
    assert len(list((tmp_path / ".slam" / "cache").glob("*/*.json"))) == 1
