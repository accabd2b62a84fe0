"""Scorers that compare a candidate model's answer with the reference, and ``assert_equivalent``.

Importing this package is cheap: rapidfuzz, jsonschema, openai and sentence-transformers are
imported only when a scorer that needs them is built.
"""

from pytest_slam.compare.assertion import (
    EquivalenceError,
    assert_equivalent,
    evaluate,
    set_obtained_writer,
)
from pytest_slam.compare.judge import JudgeCache, JudgeUnjudged, MemoryJudgeCache
from pytest_slam.compare.judge_parse import JudgeUnparseable
from pytest_slam.compare.named import SCORERS, get_scorer
from pytest_slam.compare.scorer import MissingExtra, Scorer, ScorerError, ScorerUnavailable

__all__ = [
    "SCORERS",
    "EquivalenceError",
    "JudgeCache",
    "JudgeUnjudged",
    "JudgeUnparseable",
    "MemoryJudgeCache",
    "MissingExtra",
    "Scorer",
    "ScorerError",
    "ScorerUnavailable",
    "assert_equivalent",
    "evaluate",
    "get_scorer",
    "set_obtained_writer",
]
