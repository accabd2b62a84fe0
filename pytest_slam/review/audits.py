"""Which pairs a run sets aside for audit, and what an audit label keeps (issue 50).

With ``[tool.slam] audit_per_feature = N`` a run sets aside, per test module (feature), at most
``N`` of the pairs that bands or a judge decided with a stated error (the ones a stated error can
be wrong about), drawn at random with a seed the run states (``seed_of``: from the run's start
time, so the report alone gives the same draw). ``slam review --audit`` shows exactly those pairs,
blind as any review, and stores each verdict with the verdict it audited (``audit_fields``):
``compare/audit.py`` re-tests the stated error on them, and ``slam calibrate`` reads them as
labels like any other review verdict.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT
from pytest_slam.compare.decide import MEASURED_KEYS
from pytest_slam.records import Outcome, Score
from pytest_slam.review.pairs import ReviewPair, answer_text, pair_id, text_hash

NONE_SET_ASIDE = (
    "the run in {report} set no pairs aside for audit ([tool.slam] audit_per_feature is "
    "{per}); set audit_per_feature = 2 (pairs per feature) and run the tests again"
)
NOTHING_TO_AUDIT = (
    "the run in {report} set no pairs aside for audit: none of its pairs was decided by bands "
    "or a judge with a stated error (calibrate first: `slam calibrate`), so no stated error to "
    "audit"
)


def deciding(scores: Iterable[Score]) -> Score | None:
    """The score a stated error stands behind: decided by bands, a threshold or the judge, with
    its upper bound (None: the pair is certain, undecided or unmeasured: nothing to audit)."""
    for score in scores:
        if (
            score.decided_by in MEASURED_KEYS
            and score.verdict in (EQUIVALENT, DIFFERENT)
            and score.error_upper is not None
        ):
            return score
    return None


def seed_of(started: str | None) -> int:
    """The run's audit seed, stated in its summary: from its start time, so the report gives it."""
    return int(hashlib.sha256((started or "").encode()).hexdigest()[:8], 16) % 1_000_000


def auditable(outcomes: Iterable[Outcome]) -> dict[str, list[str]]:
    """Per test module, the ids (``pairs.pair_id``) of the pairs a stated error decided."""
    found: dict[str, set[str]] = {}
    for outcome in outcomes:
        module = (outcome.test or outcome.nodeid).split("::", 1)[0]
        for pair in outcome.pairs:
            index = pair.call_index
            if pair.missing or not 0 <= index < len(outcome.calls):
                continue
            if deciding(pair.scores) is None:
                continue
            call = outcome.calls[index]
            answer = text_hash(answer_text(call.text, call.tool_calls))
            found.setdefault(module, set()).add(pair_id(module, pair.key, outcome.model, answer))
    return {module: sorted(ids) for module, ids in sorted(found.items())}


def sample(by_module: dict[str, list[str]], per_feature: int, seed: int) -> set[str]:
    """At most ``per_feature`` ids of each module, drawn with ``seed`` (one stream per module, so
    a module's draw does not depend on the others)."""
    chosen: set[str] = set()
    for module, ids in sorted(by_module.items()):
        rng = random.Random(f"{seed}\0{module}")
        chosen.update(rng.sample(sorted(ids), min(per_feature, len(ids))))
    return chosen


def set_aside(outcomes: Iterable[Outcome], per_feature: int, started: str | None) -> set[str]:
    """The ids of the pairs the run set aside for audit (empty when audits are off)."""
    if per_feature <= 0:
        return set()
    return sample(auditable(outcomes), per_feature, seed_of(started))


def set_aside_line(
    outcomes: Iterable[Outcome], per_feature: int, started: str | None
) -> str | None:
    """The run summary's line: how many pairs were set aside, from how many features, the seed."""
    if per_feature <= 0:
        return None
    by_module = auditable(outcomes)
    chosen = sample(by_module, per_feature, seed_of(started))
    if not chosen:
        return None
    return (
        f"audits: {len(chosen)} pair(s) set aside for review, at most {per_feature} per feature "
        f"of {len(by_module)} feature(s) decided by bands or the judge (seed "
        f"{seed_of(started)}): review them blind with `slam review --audit`"
    )


def audit_fields(pair: ReviewPair) -> dict[str, str]:
    """What an audit verdict keeps of the verdict it audited (``HumanVerdict.audited_*``)."""
    score = deciding(pair.scores)
    if score is None or score.error_upper is None:
        return {}
    return {
        "audited_by": MEASURED_KEYS[score.decided_by or ""],
        "audited_verdict": score.verdict or "",
        "audited_upper": f"{score.error_upper:.4f}",
    }
