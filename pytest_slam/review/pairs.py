"""What to review: each candidate answer in the JSON report beside the golden reference answer.

A review pair is one (request, candidate model, candidate answer): repeats and tests that sent the
same request with the same answer are one pair. The reference answer is read from the golden file
(the store's public API): verdicts are kept beside it, so a pair without one is not reviewed.
Which answer is shown as "A" is decided by a hash of the pair, so it is random across pairs yet the
same every time the page opens.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import JSON, Outcome, Pair, Score


@dataclass
class ReviewPair:
    """One candidate answer to review against the reference's answer to the same request."""

    module: str
    key: str
    model: str
    messages: list[dict[str, str]]  # role and text, as sent (system message first)
    reference: str
    candidate: str
    tests: list[str] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)  # as in the report's pair

    @property
    def answer_hash(self) -> str:
        return text_hash(self.candidate)

    @property
    def reference_hash(self) -> str:
        return text_hash(self.reference)

    @property
    def id(self) -> str:
        """Opaque to the page: it names the pair without naming the model."""
        return pair_id(self.module, self.key, self.model, self.answer_hash)

    @property
    def candidate_is_a(self) -> bool:
        """Seeded by the pair itself: stable across sessions, unpredictable across pairs."""
        return int(text_hash(f"order\0{self.key}\0{self.model}\0{self.answer_hash}"), 16) % 2 == 0


def pair_id(module: str, key: str, model: str, answer_hash: str) -> str:
    """A review pair's id, from what the report holds (the run's audit sample names pairs so)."""
    return text_hash(f"{module}\0{key}\0{model}\0{answer_hash}")


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]  # any answer


def message_text(message: Mapping[str, JSON]) -> str:
    """A message as text: its content (parts joined; anything else as JSON), then its tool calls."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        text = content or ""
    elif isinstance(content, list) and all(isinstance(p, dict) and "text" in p for p in content):
        text = "\n".join(str(p["text"]) for p in content)
    else:
        text = "```json\n" + json.dumps(content, indent=2, ensure_ascii=False) + "\n```"
    return answer_text(text, message.get("tool_calls"))


def answer_text(text: str | None, tool_calls: JSON) -> str:
    """An answer as reviewed: its text, and its tool calls as a JSON code block."""
    parts = [text or ""]
    if tool_calls:
        parts.append("```json\n" + json.dumps(tool_calls, indent=2, ensure_ascii=False) + "\n```")
    return "\n\n".join(p for p in parts if p)


def collect(outcomes: Iterable[Outcome], store: GoldenStore) -> tuple[list[ReviewPair], int]:
    """The pairs to review, in report order, and how many candidate answers had no golden answer."""
    pairs: dict[str, ReviewPair] = {}
    missing = 0
    for outcome in outcomes:
        for pair in outcome.pairs:
            made = _pair(outcome, pair, store)
            if made is None:
                missing += 1
            elif made.id in pairs:
                pairs[made.id].tests = sorted({*pairs[made.id].tests, *made.tests})
            else:
                pairs[made.id] = made
    return list(pairs.values()), missing


def _pair(outcome: Outcome, pair: Pair, store: GoldenStore) -> ReviewPair | None:
    calls = outcome.calls
    index = pair.call_index
    if pair.missing or not 0 <= index < len(calls):
        return None
    call = calls[index]
    test = outcome.test or outcome.nodeid
    module = test.split("::", 1)[0]
    reference = _reference(store, module, pair)
    if reference is None:
        return None
    messages = (call.request or {}).get("messages") or []
    return ReviewPair(
        module=module,
        key=pair.key,
        model=outcome.model,
        messages=[
            {"role": str(m.get("role", "")), "text": message_text(m)}
            for m in messages
            if isinstance(m, dict)
        ],
        reference=reference,
        candidate=answer_text(call.text, call.tool_calls),
        tests=[test],
        scores=list(pair.scores),
    )


def _reference(store: GoldenStore, module: str, pair: Pair) -> str | None:
    """The golden answer as committed now (None when it is gone or its file is broken)."""
    try:
        rec = store.lookup(module, pair.key)
    except (GoldenError, ValueError):
        return None
    if rec is None or not rec.answers:
        return None
    return answer_text(rec.answers[0].text, rec.answers[0].tool_calls)


# -- choosing and ordering --------------------------------------------------------------------


def select(pairs: list[ReviewPair], model: str | None, test: str | None) -> list[ReviewPair]:
    """One model (exact name) and/or one test (a part of its node id), or all."""
    return [
        p
        for p in pairs
        if (model is None or p.model == model) and (test is None or any(test in t for t in p.tests))
    ]


def scorer_passes(pair: ReviewPair) -> dict[str, bool]:
    """Each scorer's pass/fail on the pair: its own threshold; the judge's 0.5 without one."""
    out = {}
    for score in pair.scores:
        name, passed = score.scorer, score.passed
        if passed is None and _judges(name):
            passed = score.value >= 0.5  # "as good as the reference"
        if passed is not None:
            out[name] = bool(passed)
    return out


def _judges(scorer: str) -> bool:
    """Whether a score is a judge's verdict, as its scorer describes itself."""
    from pytest_slam.compare.about import JUDGE
    from pytest_slam.compare.named import describe_name

    return describe_name(scorer).evidence == JUDGE


def informativeness(pair: ReviewPair) -> tuple[int, float]:
    """Sort key, most informative first: the judge disagrees with a scorer, then scorers disagree
    among themselves, then the pair closest to a threshold."""
    passes = scorer_passes(pair)
    judged = [passes.pop(name) for name in list(passes) if _judges(name)]
    judge = judged[0] if judged else None
    if judge is not None and any(p != judge for p in passes.values()):
        rank = 0
    elif len(set(passes.values())) > 1:
        rank = 1
    else:
        rank = 2
    margins = [abs(s.value - s.threshold) for s in pair.scores if s.threshold is not None]
    return rank, min(margins, default=1.0)


def undecided(pair: ReviewPair) -> bool:
    """Whether the run left the pair undecided: no band, judge or reviewer could call it."""
    return any(score.verdict == "undecided" for score in pair.scores)


def judge_value(pair: ReviewPair, store: GoldenStore | None) -> float | None:
    """The judge's 0..1 value of the pair when the judge decided it (``by = "judge"``, or the
    cascade's verdict cached with the golden record for this very answer), else None."""
    for score in pair.scores:
        if score.decided_by == "judge" and _judges(score.scorer):
            return score.value
    if store is None or not any(score.decided_by == "judge" for score in pair.scores):
        return None
    try:
        rec = store.lookup(pair.module, pair.key)
    except (GoldenError, ValueError):
        return None
    for verdict in rec.judge.values() if rec is not None else ():
        value = verdict.get("value") if isinstance(verdict, dict) else None
        if verdict.get("candidate") == pair.candidate and isinstance(value, int | float):
            return float(value)
    return None


def judge_uncertainty(pair: ReviewPair, store: GoldenStore | None) -> tuple[int, float]:
    """Sort key of ``--order judge``, the labels that tighten the judge's measured error most
    first: pairs the judge decided, its value nearest its verdict level (grade 7 of 10, pairwise
    0.5) first; then the rest. Each such label is one more pair in the judge's own interval, and
    those nearest the level are the verdicts it is least sure of."""
    from pytest_slam.compare.judge import AT_LEAST

    value = judge_value(pair, store)
    if value is None:
        return 1, 1.0
    mode = "pairwise" if any("pairwise" in s.explanation for s in pair.scores) else "grade"
    return 0, abs(value - AT_LEAST[mode])


def ordered(
    pairs: list[ReviewPair], order: str, store: GoldenStore | None = None
) -> list[ReviewPair]:
    """Undecided pairs first (a human verdict is what they lack: the run takes it from the review
    file next time), then ``report`` keeps the report's order (by test, then model) and
    ``informative`` sorts as above. ``judge`` puts the judge's least certain verdicts first
    (:func:`judge_uncertainty`), before the undecided pairs."""
    if order == "judge":
        return sorted(pairs, key=lambda pair: judge_uncertainty(pair, store))
    kept = sorted(pairs, key=informativeness) if order == "informative" else list(pairs)
    return sorted(kept, key=lambda pair: not undecided(pair))
