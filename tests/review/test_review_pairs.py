"""What the page shows of a pair, and in which order pairs come."""

from __future__ import annotations

from review_helpers import pair

from pytest_slam.records import Score
from pytest_slam.review.pairs import message_text, ordered, select


def test_messages_show_content_parts_and_tool_calls_as_text() -> None:
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert message_text(parts) == "a\nb"
    call = {"id": "c1", "function": {"name": "refund", "arguments": "{}"}}
    asked = message_text({"role": "assistant", "content": None, "tool_calls": [call]})
    assert asked.startswith("```json\n[") and '"name": "refund"' in asked and asked.endswith("```")
    image = message_text({"role": "user", "content": [{"type": "image_url", "image_url": {}}]})
    assert image.startswith("```json") and "image_url" in image


def test_informative_order_puts_judge_scorer_disagreement_first() -> None:
    agree = pair("a", "m", 0.9, 0.9)
    near = pair("b", "m", 0.62)  # no judge; closest to the threshold
    disagree = pair("c", "m", 0.95, 0.1)
    far = pair("d", "m", 0.1)
    assert [p.key for p in ordered([agree, near, disagree, far], "informative")] == [
        "c",
        "b",
        "a",
        "d",
    ]
    assert [p.key for p in ordered([agree, near], "report")] == ["a", "b"]
    assert [p.key for p in select([agree, pair("e", "n", 0.5)], "n", None)] == ["e"]
    assert select([agree, near], None, "test_b") == [near]


def test_order_of_a_and_b_is_stable_and_mixed() -> None:
    pairs = [pair(f"k{i}", "m", 0.5) for i in range(40)]
    firsts = [p.candidate_is_a for p in pairs]
    assert firsts == [p.candidate_is_a for p in (pair(f"k{i}", "m", 0.5) for i in range(40))]
    assert 10 < sum(firsts) < 30


def test_undecided_pairs_come_first_in_either_order() -> None:
    decided, undecided, other = pair("a", "m", 0.9), pair("b", "m", 0.5), pair("c", "m", 0.1)
    undecided.scores[0].verdict = "undecided"
    decided.scores[0].verdict = "equivalent"
    for order in ("report", "informative"):
        assert ordered([decided, other, undecided], order)[0].key == "b"
    assert [p.key for p in ordered([decided, other, undecided], "report")] == ["b", "a", "c"]


def test_judge_order_offers_the_judge_s_least_certain_verdicts_first() -> None:
    """``--order judge``: pairs the judge decided, its grade nearest its level (7 of 10) first,
    then the rest in report order: the labels that tighten the judge's measured error most."""
    from pytest_slam.compare.judge import AT_LEAST

    def judged(key: str, value: float) -> object:
        made = pair(key, "m", 0.5)
        made.scores = [Score("judge", value, threshold=AT_LEAST["grade"], verdict="equivalent",
                             decided_by="judge")]  # fmt: skip
        return made

    sure, unsure, wrong_side = judged("a", 1.0), judged("b", 6 / 9), judged("c", 5 / 9)
    plain = pair("d", "m", 0.9)
    got = ordered([plain, sure, unsure, wrong_side], "judge")
    assert [p.key for p in got] == ["b", "c", "a", "d"]
