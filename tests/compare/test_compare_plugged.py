"""Scorers from outside pytest_slam, and every scorer's description of itself.

A distribution written by ``ext_dist.make_dist`` (a package and its ``*.dist-info``) declares scorers
under the entry point group ``pytest_slam.scorers``; they are found by that name, or by import path,
held to the 0..1 contract, and described like the built-in ones (issue 23).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ext_dist import make_dist

from pytest_slam.compare import Scorer, ScorerError, get_scorer, named
from pytest_slam.compare.about import JUDGE, SIMILARITY, STRUCTURE, About, describe
from pytest_slam.compare.decide import Rule
from pytest_slam.compare.named import GROUP, describe_name, scorer_class
from pytest_slam.records import Score

PACKAGE = "acme_scorers"
SCORERS = """
import re

def words(text):
    return set(re.findall(r"\\w+", text.lower()))

class Overlap:
    \"\"\"The smallest scorer: a plain class, a number in 0..1.\"\"\"

    def __init__(self, minimum=0):
        self.minimum = minimum

    def score(self, candidate, reference):
        a, b = words(candidate), words(reference)
        return len(a & b) / len(a | b) if a | b else 1.0

class Returns:
    \"\"\"Returns whatever it was told to: for the contract's errors.\"\"\"

    def __init__(self, value):
        self.value = value

    def score(self, candidate, reference):
        return self.value

class Strict:
    \"\"\"Describes itself with plain attributes: its value alone is a verdict, by structure.\"\"\"

    evidence = "structure"
    verdict_at = 1.0
    calibratable = False

    def score(self, candidate, reference):
        return float(candidate.split() == reference.split())

class Vibes:
    evidence = "vibes"

    def score(self, candidate, reference):
        return 1.0

class NoScore:
    pass
"""
EXPLAINED = """
from pytest_slam.compare.about import About
from pytest_slam.records import Score

class Explained:
    about = About(needs=frozenset({"question"}))

    def score(self, candidate, reference, question=None):
        return Score("ignored", 0.25, f"asked {question!r}")
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """acme-scorers installed on sys.path: ``overlap`` and two more entry points, one broken."""
    root = make_dist(
        tmp_path_factory.mktemp("site"), "acme-scorers",
        {f"{PACKAGE}/__init__.py": SCORERS, f"{PACKAGE}/explained.py": EXPLAINED},
        {GROUP: {"overlap": f"{PACKAGE}:Overlap", "strict": f"{PACKAGE}:Strict",
                 "gone": "acme_missing:Gone"},
         "console_scripts": {"acme": f"{PACKAGE}:main"}},
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        yield root
    for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def test_an_installed_scorer_is_found_by_its_entry_point_name(dist: Path) -> None:
    scorer = get_scorer("overlap")
    assert isinstance(scorer, Scorer) and scorer.name == "overlap"
    score = scorer.score("the cat sat", "the cat ran")
    assert (score.scorer, score.value, score.explanation) == ("overlap", 0.5, "")
    assert get_scorer("overlap", minimum=0.2).inner.minimum == 0.2  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="'overlap' has no option method; it takes: minimum"):
        get_scorer("overlap", method="ratio")


def test_a_plain_class_gets_the_defaults_similarity_calibratable_needing_nothing(
    dist: Path,
) -> None:
    about = describe_name("overlap")
    assert about == About() and about.evidence == SIMILARITY
    assert about.calibratable and not about.needs and not about.decides_alone
    # so without bands it decides nothing, and a threshold decides it as any similarity
    assert Rule().apply(Score("overlap", 0.99)).verdict is None
    assert Rule(at_least=0.5).apply(Score("overlap", 0.4)).decided_by == "threshold"


def test_an_import_path_names_a_scorer_no_entry_point_needed(dist: Path) -> None:
    scorer = get_scorer(f" {PACKAGE}:Overlap ")
    assert scorer.name == f"{PACKAGE}:Overlap"  # the name it was found by, as the report shows it
    assert scorer.score("a b", "a b").value == 1.0
    assert describe_name(f"{PACKAGE}:Overlap") == About()


def test_plain_attributes_describe_a_scorer_and_the_cascade_reads_them(dist: Path) -> None:
    about = describe_name("strict")
    assert (about.evidence, about.verdict_at, about.calibratable) == (STRUCTURE, 1.0, False)
    assert about.decides_alone
    score = get_scorer("strict").score("a  b", "a b")
    assert Rule().apply(score).verdict == "equivalent" and score.decided_by == "structure"
    assert Rule().apply(Score("strict", 0.0)).verdict == "different"


def test_a_scorer_gets_the_context_its_description_asks_for(dist: Path) -> None:
    scorer = get_scorer(f"{PACKAGE}.explained:Explained")
    assert describe(scorer).needs == {"question"}
    score = scorer.score("x", "y", question="Capital of France?")
    # its Score takes the name it was found by; value and explanation are its own
    assert (score.scorer, score.value) == (f"{PACKAGE}.explained:Explained", 0.25)
    assert score.explanation == "asked 'Capital of France?'"


@pytest.mark.parametrize(
    ("value", "shown"),
    [(1.5, "1.5"), (-0.1, "-0.1"), ("0.9", "'0.9'"), (None, "None"), (True, "True"),
     (math.nan, "nan"), ([0.5], r"\[0.5\]")],
)  # fmt: skip
def test_a_value_outside_0_1_or_not_a_number_is_one_line_naming_the_scorer(
    dist: Path, value: object, shown: str
) -> None:
    scorer = get_scorer(f"{PACKAGE}:Returns", value=value)
    with pytest.raises(ScorerError) as err:
        scorer.score("a", "b")
    message = str(err.value)
    assert "\n" not in message
    assert re.fullmatch(
        rf"{PACKAGE}:Returns\.score\(\) returned {shown}, not a number in 0\.\.1; return the "
        "similarity of the two answers, 1 for equivalent",
        message,
    ), message
    assert get_scorer(f"{PACKAGE}:Returns", value=1).score("a", "b").value == 1.0


def test_an_unknown_name_lists_built_in_and_installed_names_and_how_to_declare_one(
    dist: Path,
) -> None:
    with pytest.raises(ValueError) as err:
        get_scorer("bleu")
    message = str(err.value)
    assert "\n" not in message
    builtins = ", ".join(named.SCORERS)  # the registry's own order: a new built-in changes no test
    assert message.startswith(f"unknown scorer 'bleu'; known scorers: {builtins}; installed: ")
    assert f"{builtins}; installed: gone, overlap, strict;" in message
    assert f"entry point in group '{GROUP}'" in message
    assert "by = 'package.module:Class'" in message


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("gone", "scorer 'gone': entry point acme_missing:Gone could not be loaded: "
                 "ModuleNotFoundError: No module named 'acme_missing'"),
        ("acme_nowhere:Scorer", "scorer 'acme_nowhere:Scorer': cannot import acme_nowhere: "
                                "No module named 'acme_nowhere'"),
        (f"{PACKAGE}:Missing", f"scorer '{PACKAGE}:Missing': module {PACKAGE} has no 'Missing'"),
        (f"{PACKAGE}:NoScore", f"scorer '{PACKAGE}:NoScore': {PACKAGE}:NoScore is not a class "
                               "with a score(candidate, reference) method"),
        (f"{PACKAGE}:words", f"scorer '{PACKAGE}:words': {PACKAGE}:words is not a class"),
        (f"{PACKAGE}:Vibes", f"scorer '{PACKAGE}:Vibes': {PACKAGE}:Vibes describes itself "
                             "wrongly: evidence 'vibes' is not one of exact, structure"),
    ],
)  # fmt: skip
def test_a_scorer_that_cannot_be_had_is_one_line_saying_why(
    dist: Path, name: str, why: str
) -> None:
    with pytest.raises(ValueError) as err:
        scorer_class(name)
    assert "\n" not in str(err.value) and str(err.value).startswith(why), str(err.value)


def test_a_ready_object_with_a_score_method_is_held_to_the_contract_too(dist: Path) -> None:
    from acme_scorers import Returns  # type: ignore[import-not-found]

    scorer = get_scorer(Returns(0.75))
    assert (scorer.name, scorer.score("a", "b").value) == ("Returns", 0.75)
    with pytest.raises(ScorerError, match=r"acme_scorers:Returns.score\(\) returned 7"):
        get_scorer(Returns(7)).score("a", "b")


# name -> (evidence, verdict alone at, calibratable, needs)
BUILT_IN = {
    "exact": ("exact", 1.0, False, set()),
    "normalized": ("exact", 1.0, False, set()),
    "label": ("exact", 1.0, False, set()),
    "json": (STRUCTURE, 1.0, False, set()),
    "json_schema": (STRUCTURE, 1.0, False, {"schema"}),
    "tool_calls": (STRUCTURE, 1.0, False, {"tools"}),
    "fuzzy": (SIMILARITY, None, True, set()),
    "length": (SIMILARITY, None, True, set()),
    "semantic": (SIMILARITY, None, True, set()),
    "judge": (JUDGE, 6 / 9, False, {"question", "model"}),
}


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_scorer_describes_itself(name: str) -> None:
    about = describe(scorer_class(name))
    assert (about.evidence, about.verdict_at, about.calibratable, set(about.needs)) == (
        BUILT_IN[name]
    )


def test_two_scores_taken_as_one_decide_alone_only_by_the_same_evidence() -> None:
    assert describe_name("tool_calls+json").decides_alone
    assert describe_name("json+json_schema").compares == "text"
    assert not describe_name("tool_calls+fuzzy").decides_alone
    assert not describe_name("tool_calls+judge").decides_alone
    assert describe_name("judge").level("pairwise") == 0.5
    assert describe_name("not-installed-anywhere") == About()  # a report read elsewhere


def test_no_module_outside_compare_special_cases_a_scorer_by_class_or_name() -> None:
    """The run, the report and the CLI read scorers' descriptions (``compare/about.py``)."""
    package = Path(__file__).resolve().parents[2] / "pytest_slam"
    patterns = [
        r"\b(JudgeScorer|FuzzyScorer|ExactScorer|JsonScorer|SemanticScorer|LengthScorer)\b",
        r"\b(is_structural|SIMILARITY|STRUCTURAL)\b",
        r"isinstance\([^)]*Scorer\b",
        r"\b(scorer|by)\s*[!=]=\s*['\"]",
    ]
    found = [
        f"{path.relative_to(package)}:{n}: {line.strip()}"
        for path in package.rglob("*.py") if "compare" not in path.relative_to(package).parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(re.search(p, line) for p in patterns)
    ]  # fmt: skip
    assert found == []


class _Where:
    """Says nothing of the answers: records the thread each score ran on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def score(self, candidate: str, reference: str) -> float:
        import threading

        self.threads.append(threading.get_ident())
        return 1.0


def test_an_outside_scorer_scores_on_one_thread_of_its_own_or_inline_without_a_deadline() -> None:
    import threading

    from pytest_slam.compare.plugged import Plugged

    inner = _Where()
    fenced = Plugged("where", inner)
    assert [fenced.score("a", "b").value for _ in range(3)] == [1.0, 1.0, 1.0]
    (worker,) = set(inner.threads)  # the same thread every time: thread-bound state keeps
    assert worker != threading.get_ident()
    fenced.deadline_s = 0  # scorer_timeout_s = 0: no deadline, the test's own thread
    fenced.score("a", "b")
    assert inner.threads[-1] == threading.get_ident()
