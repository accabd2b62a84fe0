"""How the project's current equivalence configuration does on labels it was not calibrated on.

Each labelled pair is scored with the scorer its scope configures (``[tool.slam.equivalence]``,
updated by the pair's module table as the run does) and decided with that scope's
:class:`~pytest_slam.compare.bands.Bands`. The errors are shares of the pairs called equivalent
(pass error: unacceptable among them) and called different (fail error: acceptable among them),
each with an exact 95% Clopper-Pearson interval. A scope without bands decides nothing: its pairs
count as undecided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT, Bands
from pytest_slam.compare.bandselect import Counts
from pytest_slam.compare.binomial import interval
from pytest_slam.compare.calibrate import CalibrationRefused, LabelledPair, score_column
from pytest_slam.compare.named import describe_name

NOT_OPTIONS = ("by", "at_least", "fail_below", "then", "band_error", "judge_error", "modules")


@dataclass(frozen=True)
class Scope:
    """One scope's scorer, its options and its bands."""

    by: str
    options: dict[str, Any]
    bands: Bands


def scope_of(equivalence: Mapping[str, Any], module: str) -> Scope:
    """The pair's scope: the top-level table updated by its module's table (as the run does).

    A module table naming another scorer does not inherit the top level's scorer options (a
    fuzzy ``method`` means nothing to ``semantic``)."""
    table = {k: v for k, v in equivalence.items() if k != "modules"}
    modules = equivalence.get("modules")
    own = modules.get(module) if isinstance(modules, Mapping) else None
    if isinstance(own, Mapping):
        if own.get("by", table.get("by", "fuzzy")) != table.get("by", "fuzzy"):
            table = {k: v for k, v in table.items() if k in NOT_OPTIONS}
        table.update(own)
    try:
        bands = Bands(table.get("at_least"), table.get("fail_below"))
    except ValueError as exc:
        where = f"modules.{module!r}" if module in (modules or {}) else "the top-level table"
        raise CalibrationRefused(f"[tool.slam.equivalence] {where}: {exc}") from None
    by = str(table.get("by", "fuzzy"))
    if "model" in describe_name(by).needs:
        raise CalibrationRefused(
            f"[tool.slam.equivalence] by = {by!r}: --evaluate measures similarity bands without "
            "calling a model; set a similarity scorer (slam calibrate writes one) and run again"
        )
    options = {k: v for k, v in table.items() if k not in NOT_OPTIONS}
    return Scope(by, options, bands)


def error(c: Counts) -> dict[str, Any]:
    low, high = interval(c.wrong, c.called)
    return {
        "value": c.wrong / c.called if c.called else None,
        "low": low,
        "high": high,
        "wrong": c.wrong,
        "of": c.called,
    }


def evaluate(pairs: Sequence[LabelledPair], equivalence: Mapping[str, Any]) -> dict[str, Any]:
    """``{"pairs", "equivalent", "different", "undecided", "pass_error", "fail_error"}``."""
    groups: dict[str, list[LabelledPair]] = {}
    for p in pairs:
        groups.setdefault(p.module, []).append(p)
    verdicts: list[tuple[str | None, int]] = []
    for module, group in groups.items():
        scope = scope_of(equivalence, module)
        try:
            scores = score_column(scope.by, scope.options, group)
        except (ValueError, ImportError) as exc:
            raise CalibrationRefused(f"[tool.slam.equivalence]: {exc}") from None
        verdicts += [(scope.bands.decide(s), p.label) for s, p in zip(scores, group, strict=True)]
    passed = [y for v, y in verdicts if v == EQUIVALENT]
    failed = [y for v, y in verdicts if v == DIFFERENT]
    return {
        "pairs": len(verdicts),
        "equivalent": len(passed),
        "different": len(failed),
        "undecided": len(verdicts) - len(passed) - len(failed),
        "pass_error": error(Counts(len(passed), len(passed) - sum(passed))),
        "fail_error": error(Counts(len(failed), sum(failed))),
    }


def evaluation_text(result: Mapping[str, Any]) -> str:
    """The same figures for a terminal."""

    def line(name: str, err: Mapping[str, Any], called: str) -> str:
        if not err["of"]:
            return f"{name}: no pair called {called}"
        return (
            f"{name}: {err['value']:.3f} [{err['low']:.3f}, {err['high']:.3f}] "
            f"({err['wrong']} of {err['of']} called {called})"
        )

    n = result["pairs"]
    return "\n".join(
        [
            f"{n} labelled pairs: {result['equivalent']} equivalent, {result['different']} different, "
            f"{result['undecided']} undecided ({(n - result['undecided']) / n:.1%} decided)",
            line("pass error", result["pass_error"], "equivalent"),
            line("fail error", result["fail_error"], "different"),
            "(95% Clopper-Pearson intervals)",
        ]
    )
