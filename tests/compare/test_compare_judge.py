"""The judge scorer against a real loopback OpenAI-compatible judge whose answers we script.

The judge's ``complete`` is a real openai client call to FakeOpenAI (pytest_slam.testing), as the
plugin will pass one for the judge model spec.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from patience import patient

from pytest_slam.compare.judge import (
    TEMPLATE_VERSION,
    JudgeScorer,
    JudgeUnjudged,
    MemoryJudgeCache,
    judge_key,
)
from pytest_slam.compare.scorer import ScorerUnavailable
from pytest_slam.testing import FakeOpenAI

CANDIDATE = "Paris is the capital of France."
REFERENCE = "The capital of France is Paris."


def client_complete(base_url: str, model: str = "gpt-4-judge") -> Callable[[list[dict]], str]:
    """What the plugin passes: one chat completion to the judge model, text out."""
    client = openai.OpenAI(base_url=base_url, api_key="test-key", max_retries=0, timeout=patient(5))

    def complete(messages: list[dict]) -> str:
        response = client.chat.completions.create(model=model, messages=messages, temperature=0)
        return response.choices[0].message.content or ""

    return complete


def slot_a(request: dict[str, Any]) -> str:
    """The answer shown as Assistant A in a pairwise prompt."""
    prompt = request["messages"][-1]["content"]
    return re.search(r"\[Assistant A's answer\]\n(.*?)\n\n\[Assistant B", prompt, re.S).group(1)


@pytest.fixture
def judge_server() -> Iterator[Callable[..., FakeOpenAI]]:
    servers: list[FakeOpenAI] = []

    def start(answer: Any) -> FakeOpenAI:
        servers.append(FakeOpenAI(answer, model="gpt-4-judge").start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("Accurate and concise.\n\nRating: [[7]]", 6 / 9),
        ("7/10", 6 / 9),
        ("I'd give it a 7", 6 / 9),
        ('{"score": 10}', 1.0),
        ("Rating: [[1]]", 0.0),
    ],
)
def test_grade_mode(judge_server: Callable[..., FakeOpenAI], reply: str, value: float) -> None:
    server = judge_server(reply)
    scorer = JudgeScorer(complete=client_complete(server.base_url), model="gpt-4-judge")
    score = scorer.score(CANDIDATE, REFERENCE, question="What is the capital of France?")
    assert score.value == pytest.approx(value)
    assert score.explanation.startswith("judge gpt-4-judge graded ")
    assert server.hits == 1
    prompt = server.requests[0].json["messages"][-1]["content"]
    assert "What is the capital of France?" in prompt
    assert f"[Reference answer]\n{REFERENCE}" in prompt
    assert f"[Assistant's answer]\n{CANDIDATE}" in prompt


def test_nonsense_twice_is_unjudged_never_zero(judge_server: Callable[..., FakeOpenAI]) -> None:
    server = judge_server("Bananas are yellow.")
    cache = MemoryJudgeCache()
    scorer = JudgeScorer(complete=client_complete(server.base_url), cache=cache)
    with pytest.raises(JudgeUnjudged, match="gave no readable verdict after a retry: judge "
                       r"answered nonsense: 'Bananas are yellow\.'") as info:  # fmt: skip
        scorer.score(CANDIDATE, REFERENCE)
    assert info.value.answer == "Bananas are yellow."
    retry = server.requests[1].json["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Bananas are yellow."}
    assert retry[-1]["content"].startswith("Your answer had no readable rating")
    assert cache.data == {}
    with pytest.raises(JudgeUnjudged):
        scorer.score(CANDIDATE, REFERENCE)
    assert server.hits == 4  # asked again: an unjudged pair is never replayed


def test_a_readable_retry_gives_the_verdict(judge_server: Callable[..., FakeOpenAI]) -> None:
    def answer(req: dict[str, Any]) -> str:
        reminded = req["messages"][-1]["content"].startswith("Your answer had no")
        return "Rating: [[4]]" if reminded else "It is quite good, I think."

    server = judge_server(answer)
    cache = MemoryJudgeCache()
    score = JudgeScorer(complete=client_complete(server.base_url), cache=cache).score(
        CANDIDATE, REFERENCE
    )
    assert score.value == pytest.approx(3 / 9) and server.hits == 2
    (verdict,) = cache.data.values()
    assert verdict["answers"] == ["It is quite good, I think.", "Rating: [[4]]"]


def test_pairwise_asks_both_orders(judge_server: Callable[..., FakeOpenAI]) -> None:
    server = judge_server(lambda req: "[[A]]" if slot_a(req) == CANDIDATE else "[[B]]")
    score = JudgeScorer(complete=client_complete(server.base_url), mode="pairwise").score(
        CANDIDATE, REFERENCE
    )
    assert score.value == 1.0
    assert score.explanation == "judge judge pairwise: candidate as A win, as B win"
    assert [slot_a(r.json) for r in server.requests] == [CANDIDATE, REFERENCE]


def test_pairwise_cancels_position_bias(judge_server: Callable[..., FakeOpenAI]) -> None:
    server = judge_server("Assistant A is better.")
    score = JudgeScorer(complete=client_complete(server.base_url), mode="pairwise").score(
        CANDIDATE, REFERENCE
    )
    assert score.value == 0.5
    assert "position bias" in score.explanation


@pytest.mark.parametrize(
    ("prefers", "value"), [("reference", 0.0), ("tie", 0.5), ("candidate", 1.0)]
)
def test_pairwise_values(
    judge_server: Callable[..., FakeOpenAI], prefers: str, value: float
) -> None:
    def answer(req: dict[str, Any]) -> str:
        if prefers == "tie":
            return "Both are equally good. [[C]]"
        wanted = CANDIDATE if prefers == "candidate" else REFERENCE
        return "My verdict: [[A]]" if slot_a(req) == wanted else "My verdict: [[B]]"

    server = judge_server(answer)
    scorer = JudgeScorer(complete=client_complete(server.base_url), mode="pairwise")
    assert scorer.score(CANDIDATE, REFERENCE).value == value


def test_pairwise_nonsense_in_one_order_is_unjudged(
    judge_server: Callable[..., FakeOpenAI],
) -> None:
    def answer(req: dict[str, Any]) -> str:
        prompt = req["messages"][1]["content"]  # the pairwise prompt, also on the retry
        return "[[A]]" if slot_a({"messages": [{"content": prompt}]}) == CANDIDATE else "no comment"

    server = judge_server(answer)
    scorer = JudgeScorer(complete=client_complete(server.base_url), mode="pairwise")
    with pytest.raises(JudgeUnjudged, match="judge answered nonsense: 'no comment'"):
        scorer.score(CANDIDATE, REFERENCE)
    assert server.hits == 3  # one order read at once, the other asked twice


def test_cached_verdict_replays_with_the_judge_stopped(
    judge_server: Callable[..., FakeOpenAI],
) -> None:
    server = judge_server("Rating: [[8]]")
    cache = MemoryJudgeCache()
    complete = client_complete(server.base_url)
    first = JudgeScorer(complete=complete, model="gpt-4-judge", cache=cache).score(
        CANDIDATE, REFERENCE, question="Capital?"
    )
    assert server.hits == 1
    (verdict,) = cache.data.values()
    assert verdict["grade"] == 8 and verdict["template"] == TEMPLATE_VERSION
    server.stop()

    replayed = JudgeScorer(complete=complete, model="gpt-4-judge", cache=cache).score(
        CANDIDATE, REFERENCE, question="Capital?"
    )
    assert replayed.value == first.value == pytest.approx(7 / 9)
    assert replayed.explanation.endswith("(cached verdict)")
    assert server.hits == 1
    # The judge really is down: anything not cached cannot be judged.
    with pytest.raises(ScorerUnavailable, match="judge 'gpt-4-judge' could not be asked"):
        JudgeScorer(complete=complete, model="gpt-4-judge", cache=cache).score(
            CANDIDATE, REFERENCE, question="Another question?"
        )


def test_damaged_cached_verdict_is_asked_again(judge_server: Callable[..., FakeOpenAI]) -> None:
    server = judge_server("Rating: [[4]]")
    cache = MemoryJudgeCache()
    cache.put(judge_key("judge", "grade", CANDIDATE, REFERENCE, None), {"grade": "lost"})
    score = JudgeScorer(complete=client_complete(server.base_url), cache=cache).score(
        CANDIDATE, REFERENCE
    )
    assert score.value == pytest.approx(3 / 9)
    assert server.hits == 1
    assert next(iter(cache.data.values()))["grade"] == 4


def test_cache_key_covers_everything_that_shapes_a_verdict() -> None:
    base = ("gpt-4", "grade", CANDIDATE, REFERENCE, "q")
    key = judge_key(*base)
    assert key.startswith("judge-") and key == judge_key(*base)
    variants = [
        ("gpt-4o", "grade", CANDIDATE, REFERENCE, "q"),
        ("gpt-4", "pairwise", CANDIDATE, REFERENCE, "q"),
        ("gpt-4", "grade", CANDIDATE + " ", REFERENCE, "q"),
        ("gpt-4", "grade", CANDIDATE, REFERENCE + ".", "q"),
        ("gpt-4", "grade", CANDIDATE, REFERENCE, "q2"),
    ]
    assert len({judge_key(*v) for v in variants} | {key}) == len(variants) + 1


def test_judge_endpoint_down_is_scorer_unavailable() -> None:
    server = FakeOpenAI("Rating: [[5]]").start()
    url = server.base_url
    server.stop()
    scorer = JudgeScorer(complete=client_complete(url), model="gpt-4-judge")
    with pytest.raises(ScorerUnavailable, match="could not be asked: APIConnectionError"):
        scorer.score(CANDIDATE, REFERENCE)


def test_judge_http_error_is_scorer_unavailable() -> None:
    with FakeOpenAI("Rating: [[5]]", fail=[500]) as server:
        scorer = JudgeScorer(complete=client_complete(server.base_url))
        with pytest.raises(ScorerUnavailable, match="InternalServerError"):
            scorer.score(CANDIDATE, REFERENCE)


def test_empty_candidate_is_not_sent_to_the_judge(judge_server: Callable[..., FakeOpenAI]) -> None:
    server = judge_server("Rating: [[10]]")
    score = JudgeScorer(complete=client_complete(server.base_url)).score("", REFERENCE)
    assert (score.value, score.explanation) == (0.0, "candidate answer is empty")
    assert server.hits == 0


def test_huge_answer_is_clipped_in_the_prompt(judge_server: Callable[..., FakeOpenAI]) -> None:
    server = judge_server("Rating: [[2]]")
    huge = "word " * 50_000
    scorer = JudgeScorer(complete=client_complete(server.base_url), max_answer_chars=1_000)
    assert scorer.score(huge, REFERENCE).value == pytest.approx(1 / 9)
    prompt = server.requests[0].json["messages"][-1]["content"]
    assert len(prompt) < 3_000
    assert "[... 249000 more characters not shown]" in prompt


def test_bad_mode_and_complete() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        JudgeScorer(complete=lambda messages: "", mode="vote")
    with pytest.raises(ValueError, match="complete must be a callable"):
        JudgeScorer(complete="gpt-4")  # type: ignore[arg-type]
