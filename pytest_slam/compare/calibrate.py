"""``slam calibrate``: certified pass and fail bands per scope, from labelled pairs, with the figures.

A similarity score decides a pair only where the project's own labels showed it can (bands chosen
on other data miss badly: bench/README.md). Per scope (a test module with labels enough, and the
rest) every scorer in :data:`SCORERS` is scored on the labelled pairs, :mod:`.bandselect`
certifies its bands (Learn then Test, Bonferroni over the scorers), and the scorer that decides the
most pairs with both errors held is kept. Where the labels come from is the command's business
(``pytest_slam.cli.calibrate_cmd``); writing the table is ``.calibrate_table``'s.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_slam.compare.bandselect import Choice, Counts, Targets, band_counts, choose_bands
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.compare.domain import Domain, measure_domain
from pytest_slam.compare.judge import GOOD_GRADE, JudgeVerdict
from pytest_slam.compare.policy import reaches_scorer
from pytest_slam.compare.validity import Estimate, grouped_bootstrap
from pytest_slam.errors import SlamError

MIN_PAIRS = 40
MIN_EACH = 10  # of "equivalent" and of "not equivalent"
MODULE_MIN_PAIRS = 200  # a module with this many labels is calibrated on its own
SCORERS: dict[str, tuple[str, dict[str, str]]] = {  # name -> (scorer, options), tried in order
    "fuzzy token_sort_ratio": ("fuzzy", {"method": "token_sort_ratio"}),
    "fuzzy token_set_ratio": ("fuzzy", {"method": "token_set_ratio"}),
    "fuzzy ratio": ("fuzzy", {"method": "ratio"}),
    "length": ("length", {}),
    "containment": ("containment", {}),
    "semantic": ("semantic", {}),
}
BASELINE = ("fuzzy token_sort_ratio", 0.7)  # the plain threshold users reach for first
TOP = ""  # the scope of the top-level table


class CalibrationRefused(SlamError, kind="calibrate"):
    """Too few labels, a bad input, or nothing to write: the message says what is needed."""


@dataclass
class LabelledPair:
    unit: str  # the prompt (golden key): pairs of one prompt go in or out of a split together
    candidate: str
    reference: str
    label: int  # 1: acceptable ("equivalent")
    grade: float  # the graded signal in 0..1
    module: str = ""  # the test module the pair belongs to ("" unknown)
    question: str | None = None  # what was asked: given to a judge, as the cascade gives it


@dataclass(frozen=True)
class Aids:
    """What makes scoring many labels quicker to repeat and to watch, never its result: an
    embeddings cache (``DiskCache``) and a progress callable told one line at a time."""

    cache: DiskCache | None = None
    progress: Callable[[str], None] | None = None


NO_AIDS = Aids()


@dataclass
class ScopeResult:
    """The bands chosen for one scope, every scorer's attempt, and the plain 0.7 threshold."""

    scope: str
    pairs: int
    prompts: int
    tried: list[Choice]
    baseline: tuple[Counts, Counts] | None  # None: the run did not score the plain scorer
    by_prompt: dict[str, Estimate] = field(default_factory=dict)  # chosen bands' errors
    domain: Domain | None = None  # what the chosen bands were measured on (``domain.py``)
    # of ``pairs``, those a certain case settles before the bands (``policy.reaches_scorer``):
    # labelled, but not what the bands' error and domain were measured on
    settled: int = 0
    scorers_tried: int = field(init=False)

    def __post_init__(self) -> None:
        self.scorers_tried = len(self.tried)

    @property
    def chosen(self) -> Choice | None:
        """The certified choice deciding the most pairs (earlier scorers win ties)."""
        held = [c for c in self.tried if c.at_least is not None or c.fail_below is not None]
        return max(held, key=lambda c: c.decided) if held else None


def verdict_label(verdict: JudgeVerdict) -> tuple[int, float] | None:
    """(label, graded value) of a cached judge verdict, or None when it is not usable."""
    value = verdict.get("value")
    if not isinstance(value, int | float) or not isinstance(verdict.get("candidate"), str):
        return None
    if verdict.get("mode") == "pairwise":
        return int(value >= 0.5), float(value)
    grade = verdict.get("grade")
    return (int(grade >= GOOD_GRADE), float(value)) if isinstance(grade, int | float) else None


def check_enough(pairs: Sequence[LabelledPair]) -> None:
    """Refuse with the counts it needs, and how to get them."""
    good = sum(p.label for p in pairs)
    if len(pairs) >= MIN_PAIRS and min(good, len(pairs) - good) >= MIN_EACH:
        return
    raise CalibrationRefused(
        f"slam calibrate needs at least {MIN_PAIRS} labelled pairs with {MIN_EACH} of each verdict; "
        f"found {len(pairs)} ({good} equivalent, {len(pairs) - good} not). Cache judge verdicts "
        "with [tool.slam] judge, equivalence = { by = 'judge' } and pytest --slm-record=new, "
        "or pass human verdicts with --labels FILE.jsonl"
    )


def available_scorers(only: Sequence[str] = ()) -> dict[str, tuple[str, dict[str, str]]]:
    """The scorers calibration tries here (those named by ``only``'s last words, when given): each
    one whose description says it is calibratable, and only where the modules it requires are
    installed (semantic without its extra is left out)."""
    return {
        n: s
        for n, s in SCORERS.items()
        if _calibratable_here(s[0]) and (not only or n.split()[-1] in only)
    }


def _calibratable_here(by: str) -> bool:
    from pytest_slam.compare.named import describe_name

    about = describe_name(by)
    return about.calibratable and all(importlib.util.find_spec(m) for m in about.requires)


def score_column(
    by: str, options: dict[str, str], pairs: Sequence[LabelledPair], aids: Aids = NO_AIDS
) -> list[float]:
    """One scorer's score of every pair (semantic in one batch, its embeddings in ``aids.cache``)."""
    from pytest_slam.compare.named import get_scorer
    from pytest_slam.compare.semantic import SemanticScorer

    scorer = get_scorer(by, **options)
    say = aids.progress
    if isinstance(scorer, SemanticScorer):
        scorer.cache = aids.cache
        if say is not None:
            scorer.progress = lambda done, total: say(f"{by}: {done}/{total} texts embedded")
    batch = getattr(scorer, "score_many", None)
    if batch is not None:
        values = [s.value for s in batch([(p.candidate, p.reference) for p in pairs])]
    else:
        values = [scorer.score(p.candidate, p.reference).value for p in pairs]
    if say is not None:
        method = f" {options['method']}" if "method" in options else ""
        say(f"{by}{method}: {len(pairs)} pairs scored")
    return values


def calibrate_columns(
    scope: str,
    columns: dict[str, list[float]],
    labels: Sequence[int],
    units: Sequence[str],
    targets: Targets,
    resamples: int = 0,
) -> ScopeResult:
    """Certified bands of every scored column, Bonferroni over the columns; with ``resamples``,
    the chosen bands' errors get a bootstrap interval resampled by prompt too."""
    tried = [
        choose_bands(name, col, labels, targets, len(columns)) for name, col in columns.items()
    ]
    name, threshold = BASELINE
    base = columns.get(name)
    baseline = band_counts(base, labels, threshold, threshold) if base else None
    result = ScopeResult(scope, len(labels), len(set(units)), tried, baseline)
    chosen = result.chosen
    if chosen is not None and resamples:
        result.by_prompt = prompt_intervals(
            chosen, columns[chosen.scorer], labels, units, resamples
        )
    return result


def prompt_intervals(
    chosen: Choice,
    scores: Sequence[float],
    labels: Sequence[int],
    units: Sequence[str],
    resamples: int,
) -> dict[str, Estimate]:
    """Pass and fail error of the chosen bands with a bootstrap interval resampled by prompt:
    how much the pairs of one prompt move together, beside the pair-level exact interval."""

    def error(band: int) -> Callable[[list[int]], float]:
        def statistic(rows: list[int]) -> float:
            counts = band_counts(
                [scores[i] for i in rows],
                [labels[i] for i in rows],
                chosen.at_least,
                chosen.fail_below,
            )[band]
            return counts.rate

        return statistic

    return {
        band: grouped_bootstrap(units, error(i), resamples)
        for i, band in enumerate(("pass", "fail"))
    }


Scorers = dict[str, tuple[str, dict[str, str]]]


def calibrate_scope(
    scope: str,
    pairs: Sequence[LabelledPair],
    targets: Targets,
    scorers: Scorers,
    resamples: int,
    aids: Aids = NO_AIDS,
    source: str = "",
    covers: Sequence[str] = (),
) -> ScopeResult:
    """The bands of one scope (a module, or ``TOP``), their error and the domain they were
    measured on; ``covers``: test modules the user names as like these labels."""
    # an identical answer or a blank side is settled before the bands in a run (policy): their
    # error and domain are measured on the pairs they decide, and on nothing else
    labelled = pairs
    pairs = [p for p in pairs if reaches_scorer(p.candidate, p.reference)]
    columns = {name: score_column(by, opts, pairs, aids) for name, (by, opts) in scorers.items()}
    labels, units = [p.label for p in pairs], [p.unit for p in pairs]
    result = calibrate_columns(scope, columns, labels, units, targets, resamples)
    result.pairs, result.settled = len(labelled), len(labelled) - len(pairs)
    result.prompts = len({p.unit for p in labelled})
    chosen = result.chosen
    if chosen is not None:
        result.domain = measure_domain(
            scope_text(scope, pairs, source),
            [p.candidate for p in pairs],
            [p.reference for p in pairs],
            columns[chosen.scorer],
            modules=features(pairs, covers),
        )
    return result


def features(pairs: Sequence[LabelledPair], covers: Sequence[str] = ()) -> list[str] | None:
    """The test modules (features) bands measured on ``pairs`` hold on: the labels' own modules
    and those the user names (``covers``); None, unknown, when a label has no module and none is
    named (the bands then decide every module, as before, and the summary says so)."""
    if any(not p.module for p in pairs):
        return sorted(set(covers)) or None
    return sorted({p.module for p in pairs} | set(covers))


def scope_text(scope: str, pairs: Sequence[LabelledPair], source: str) -> str:
    """What the labels of a scope were: its module, the modules they came from, or their file."""
    if scope:
        return scope
    modules = sorted({p.module for p in pairs if p.module})
    if not modules:
        return source
    more = f" and {len(modules) - 3} more" if len(modules) > 3 else ""
    return f"{source + ': ' if source else ''}{', '.join(modules[:3])}{more}"


def calibrate(
    pairs: Sequence[LabelledPair],
    targets: Targets,
    resamples: int = 0,
    scorers: Scorers | None = None,
    module_min: int = MODULE_MIN_PAIRS,
    aids: Aids = NO_AIDS,
    source: str = "",
    covers: Sequence[str] = (),
) -> list[ScopeResult]:
    """The top-level result first, then each module that certified bands on its own labels.
    The top-level bands hold on the labels' modules and those in ``covers`` (``features``).

    A module with ``module_min`` labels is calibrated on them alone; one whose labels certify no
    band joins the rest under the top-level table (a module's table updates the top level, so it
    could not unset the top-level bands). Too few pairs left: the top level takes all of them.
    Refuses when there are too few labels overall.
    """
    check_enough(pairs)
    scorers = scorers or available_scorers()
    by_module: dict[str, list[LabelledPair]] = {}
    for p in pairs:
        by_module.setdefault(p.module, []).append(p)
    own = []
    for module, group in sorted(by_module.items()):
        if module and len(group) >= module_min:
            result = calibrate_scope(module, group, targets, scorers, resamples, aids, source)
            if result.chosen is not None and result.chosen.at_least is not None:
                own.append(result)  # a fail band alone could not unset the top level's pass band
    done = {r.scope for r in own}
    rest = [p for p in pairs if p.module not in done]
    if len(own) == 1 and not rest:
        own, rest = [], list(pairs)  # one module holds every label: the top-level table is its
    rest = rest if len(rest) >= MIN_PAIRS else list(pairs)
    top = calibrate_scope(TOP, rest, targets, scorers, resamples, aids, source, covers)
    return [top, *own]
