"""assert_equivalent: inputs it accepts, defaults, and the failure message people read."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_helpers import TOO_LARGE, no_traceback, run_full

from pytest_slam.compare import EquivalenceError, assert_equivalent, evaluate, set_obtained_writer
from pytest_slam.compare.diff import side_by_side
from pytest_slam.compare.text import ExactScorer
from pytest_slam.records import Call, GoldenAnswer, GoldenRecord

REF = "The capital of France is Paris. It is known for the Eiffel Tower and the Louvre."


@pytest.fixture(autouse=True)
def no_writer() -> Iterator[None]:
    set_obtained_writer(None)
    yield
    set_obtained_writer(None)


def test_passing_returns_the_score_with_threshold() -> None:
    score = assert_equivalent(REF.upper(), REF)
    assert (score.scorer, score.value, score.threshold, score.passed) == ("fuzzy", 1.0, 0.7, True)


def test_accepts_call_golden_answer_and_golden_record() -> None:
    call = Call(model="smollm2", role="candidate", request={}, text=REF)
    record = GoldenRecord(key="k1", request={}, answers=[GoldenAnswer(text=REF)])
    assert assert_equivalent(call, record, by="exact").value == 1.0
    assert assert_equivalent(call, GoldenAnswer(text=REF), by="exact").value == 1.0


def test_golden_record_without_answer_and_wrong_types() -> None:
    with pytest.raises(ValueError, match="reference: golden record k2 has no recorded answer"):
        assert_equivalent("x", GoldenRecord(key="k2", request={}))
    with pytest.raises(TypeError, match=r"candidate must be a str, Call, .* not int"):
        assert_equivalent(42, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at_least must be between 0 and 1"):
        assert_equivalent("x", "x", at_least=80)


def test_parsed_json_defaults_to_the_json_scorer() -> None:
    score = assert_equivalent({"b": [1, 2], "a": 1}, '{"a": 1, "b": [1, 2]}')
    assert (score.scorer, score.value) == ("json", 1.0)
    with pytest.raises(EquivalenceError) as info:
        assert_equivalent({"a": 1, "id": 3}, {"a": 2, "id": 4}, at_least=0.9, ignore=["$.id"])
    assert "by json: score 0.000 < at_least 0.900" in str(info.value)
    assert "$.a expected 2, got 1" in str(info.value)


def test_failure_message_shows_scorer_score_reason_and_diff() -> None:
    cand = "The capital of France is Lyon. It is known for silk.\nSecond line."
    with pytest.raises(EquivalenceError) as info:
        assert_equivalent(cand, REF + "\nSecond line.", at_least=0.95)
    err = info.value
    assert isinstance(err, AssertionError)
    assert err.score.passed is False and err.score.threshold == 0.95
    lines = str(err).splitlines()
    assert lines[0] == (
        f"candidate is not equivalent to the reference by fuzzy: "
        f"score {err.score.value:.3f} < at_least 0.950"
    )
    assert lines[1].startswith("why: token_sort_ratio ")
    assert lines[3].split() == ["reference", "candidate"]
    assert any(" | " in line and "Paris" in line and "Lyon" in line for line in lines)
    assert max(len(line) for line in lines[3:]) <= 100


def test_failed_call_is_a_clear_verdict() -> None:
    call = Call(model="m", role="candidate", request={}, error="HTTP 500 from upstream")
    with pytest.raises(EquivalenceError, match="why: candidate call failed: HTTP 500"):
        assert_equivalent(call, REF)


def test_empty_candidate_verdict() -> None:
    with pytest.raises(EquivalenceError, match="why: candidate answer is empty"):
        assert_equivalent("", REF)


def test_huge_answers_are_trimmed_in_the_diff_but_scored_whole() -> None:
    ref = "\n".join(f"line {i} of the reference answer" for i in range(5_000))
    cand = ref.replace("line 4990 ", "LINE 4990 changed ")
    score = evaluate(cand, ref, by="exact")
    assert score.value == 0.0 and "char" in score.explanation
    with pytest.raises(EquivalenceError) as info:
        assert_equivalent(cand, ref, by="exact")
    text = str(info.value)
    assert "more characters trimmed" in text
    assert "more diff rows trimmed" in text or "equal lines" in text
    assert len(text.splitlines()) < 80


def test_side_by_side_markers_and_wrapping() -> None:
    out = side_by_side("same\nold line\ngone", "same\nnew line\n", width=60)
    rows = out.splitlines()
    assert rows[2].startswith("same") and " | " not in rows[2]
    assert "old line" in rows[3] and " | " in rows[3] and rows[3].endswith("new line")
    assert rows[4].startswith("gone") and rows[4].endswith(" <")
    long = side_by_side("x " * 200, "y " * 200, width=100)
    assert max(len(line) for line in long.splitlines()) <= 100
    collapsed = side_by_side("\n".join(map(str, range(50))) + "\nA", "\n".join(map(str, range(50))))
    assert "[... 46 equal lines ...]" in collapsed


def test_obtained_writer_path_ends_the_message() -> None:
    with tempfile.TemporaryDirectory() as tmp:

        def write(text: str, scorer: str) -> str:
            path = Path(tmp) / f"answer.{scorer}.obtained.txt"
            part = path.with_suffix(".tmp")
            part.write_text(text)
            os.replace(part, path)
            return str(path)

        set_obtained_writer(write)
        with pytest.raises(EquivalenceError) as info:
            assert_equivalent("Lyon", "Paris", by="exact")
        path = Path(tmp) / "answer.exact.obtained.txt"
        assert str(info.value).splitlines()[-1] == f"obtained answer written to {path}"
        assert path.read_text() == "Lyon"


def test_failing_writer_does_not_mask_the_verdict() -> None:
    def broken(text: str, scorer: str) -> str:
        raise PermissionError("golden dir is read-only")

    set_obtained_writer(broken)
    with pytest.raises(EquivalenceError) as info:
        assert_equivalent("Lyon", "Paris", by=ExactScorer())
    assert str(info.value).splitlines()[-1] == (
        "could not write the obtained answer: PermissionError: golden dir is read-only"
    )
    set_obtained_writer(lambda text, scorer: None)
    with pytest.raises(EquivalenceError) as info:
        assert_equivalent("Lyon", "Paris", by="exact")
    assert "obtained answer" not in str(info.value)


def test_an_obtained_answer_on_a_full_disk_is_one_line_and_the_verdict_stands(
    tmp_path: Path,
) -> None:
    """The run's writer (``write_obtained``) under a file-size limit: the failure's text ends with
    the file, the error and the fix; no part of the answer is left in the folder."""
    (tmp_path / "obtained").mkdir()
    script = (
        "from pathlib import Path\n"
        "from pytest_slam.compare import EquivalenceError, assert_equivalent, set_obtained_writer\n"
        "from pytest_slam.run.start.repeat import write_obtained\n"
        "set_obtained_writer(lambda text, scorer: str(write_obtained(\n"
        "    Path('obtained'), f'answer-{scorer}.txt', text)))\n"
        "try:\n"
        "    assert_equivalent('Lyon ' * 100, 'Paris', by='exact')\n"
        "except EquivalenceError as exc:\n"
        "    print(str(exc).splitlines()[0])\n"
        "    print(str(exc).splitlines()[-1])\n"
    )
    done = run_full([sys.executable, "-c", script], tmp_path, limit=100)
    no_traceback(done)
    verdict, last = done.stdout.splitlines()
    assert verdict.startswith("candidate is not equivalent to the reference by exact")
    assert last == (
        f"the obtained answer was not kept: could not write obtained/answer-exact.txt: {TOO_LARGE}"
    )
    assert sorted(p.name for p in (tmp_path / "obtained").iterdir()) == [".gitignore"]
