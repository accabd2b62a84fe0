"""The run summary's "human review" line: the committed verdicts for this run's candidates."""

from __future__ import annotations

from pathlib import Path

from pytest_slam.golden.store import GoldenStore
from pytest_slam.review.agreement import summary_line
from pytest_slam.review.verdicts import ReviewError, all_verdicts


def human_review_lines(golden_root: Path, reference: str, models: list[str]) -> list[str]:
    """One line when verdicts exist for these models; none otherwise (a run without reviews
    says nothing); an unreadable review file is named, never a traceback."""
    try:
        found = all_verdicts(GoldenStore(golden_root, reference))
    except (ReviewError, OSError, ValueError) as exc:
        return [f"human review not read: {exc}"]
    line = summary_line([v for vs in found.values() for v in vs], models)
    return [line] if line else []
