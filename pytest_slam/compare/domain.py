"""What a calibration was measured on, and whether a pair lies inside it (issue 42).

A band's measured error holds on pairs like those it was measured on: bands calibrated on short QA
answers called a 40-character prefix of a 2,000-character reference equivalent "at 0.039", where
on long answers they were wrong on half their passes (bench/README.md section 24). So
``slam calibrate`` records the domain beside the error (``band_error.domain``): the scope (a label
set's name, or the test modules the labels came from) and the ranges of what the bands' evidence
depends on, over the calibration pairs: the reference answer's length in characters, the
candidate/reference length ratio, and the scorer's values. A pair outside any range is not decided
by the bands (``policy.decide_pair``): it goes on down the cascade or stays undecided, saying why.

A calibration written before domains were recorded has none: its domain is unknown, and its bands
decide every pair as before (the run's summary says so once, with the fix: calibrate again).

Length is not kind (issue 50): short-QA bands met MT-Bench answers of the same lengths and passed
them wrong three times in ten, each stamped with short QA's error. So the domain also names the
test modules (features) the labels came from (``modules``); a pair of any other module is not
decided by the bands, whatever its length (``outside``), and a judge's measured error is not put
on its verdicts. Labels without a module record no modules: the scope is unknown, the bands decide
every module as before and the summary says so (``SCOPE_UNKNOWN``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_slam.records import JSON, Score

UNKNOWN = (
    "bands calibrated before calibrations recorded their domain (band_error has no domain): "
    "their error is assumed to hold on every pair; run `slam calibrate` again to record it"
)


SCOPE_UNKNOWN = (
    "bands calibrated on labels without a test module (band_error.domain has no modules): the "
    "features they hold on are unknown, so they decide every module's pairs; give each label its "
    "module (or `slam calibrate --modules`) and calibrate again"
)
OUTSIDE_FEATURES = (
    "outside the features the bands were measured on ({modules}); label this feature's answers "
    'or then = ["judge"]'
)


@dataclass(frozen=True)
class Domain:
    """The ranges a calibration's pairs spanned and the test modules they came from (each None:
    not recorded, not checked)."""

    scope: str = ""
    reference_chars: tuple[int, int] | None = None
    length_ratio: tuple[float, float] | None = None
    values: tuple[float, float] | None = None
    modules: tuple[str, ...] | None = None

    def as_table(self) -> dict[str, JSON]:
        """As ``band_error.domain`` in pyproject.toml (config.Domain)."""
        table: dict[str, JSON] = {"scope": self.scope} if self.scope else {}
        if self.modules is not None:
            table["modules"] = list(self.modules)
        for name in ("reference_chars", "length_ratio", "values"):
            span = getattr(self, name)
            if span is not None:
                table[name] = [span[0], span[1]]
        return table

    @classmethod
    def from_table(cls, table: Mapping[str, object]) -> Domain:
        chars = _span(table.get("reference_chars"), int)
        return cls(
            str(table.get("scope") or ""),
            (int(chars[0]), int(chars[1])) if chars is not None else None,
            _span(table.get("length_ratio"), float),
            _span(table.get("values"), float),
            modules_of(table),
        )

    def outside(self, candidate: str, reference: str, value: float, module: str = "") -> str | None:
        """Why the pair (of test module ``module``, "" unknown) lies outside the domain (None:
        inside). Another feature first: no length makes its answers like the labels'."""
        if self.modules is not None and module and module not in self.modules:
            return OUTSIDE_FEATURES.format(modules=shown_modules(self.modules))
        ref, cand = len(reference.strip()), len(candidate.strip())
        said = []
        if self.reference_chars is not None and not _within(ref, self.reference_chars):
            low, high = self.reference_chars
            said.append(f"reference {ref:,} characters; calibrated on {low:,}-{high:,}")
        ratio = cand / ref if ref else 0.0
        if self.length_ratio is not None and not _within(ratio, self.length_ratio):
            low_r, high_r = self.length_ratio
            said.append(
                f"candidate/reference length {ratio:.2f}; calibrated on {low_r:g}-{high_r:g}"
            )
        if self.values is not None and not _within(value, self.values):
            low_v, high_v = self.values
            said.append(f"score {value:.2f}; calibrated on {low_v:g}-{high_v:g}")
        if not said:
            return None
        scope = f" ({self.scope})" if self.scope else ""
        return f"outside what the bands were measured on{scope}: {'; '.join(said)}"


def modules_of(table: Mapping[str, object]) -> tuple[str, ...] | None:
    """A domain table's ``modules`` (None: not recorded, the scope unknown)."""
    found = table.get("modules")
    if isinstance(found, Sequence) and not isinstance(found, str):
        return tuple(str(m) for m in found)
    return None


def shown_modules(modules: Sequence[str]) -> str:
    """At most three modules by name, then how many more."""
    more = f" and {len(modules) - 3} more" if len(modules) > 3 else ""
    return ", ".join(modules[:3]) + more


def outside_features(measured: Mapping[str, object] | None, module: str) -> bool:
    """Whether a measured error (``band_error``, ``judge_error``) was measured on other test
    modules than ``module``'s (False when either is unknown)."""
    table = measured.get("domain") if measured else None
    modules = modules_of(table) if isinstance(table, Mapping) else None
    return modules is not None and bool(module) and module not in modules


def _span(value: object, kind: type[int] | type[float]) -> tuple[float, float] | None:
    if isinstance(value, Sequence) and len(value) == 2:
        low, high = value
        if isinstance(low, int | float) and isinstance(high, int | float):
            return kind(low), kind(high)
    return None


def _within(value: float, span: tuple[float, float]) -> bool:
    return span[0] <= value <= span[1]


def measure_domain(
    scope: str,
    candidates: Sequence[str],
    references: Sequence[str],
    values: Sequence[float],
    trim: float = 0.0,
    modules: Sequence[str] | None = None,
) -> Domain:
    """The domain of a calibration's pairs: the full range of each measure over them (a band's
    error was measured on every one of them, and on nothing beyond), and the test ``modules``
    they came from (None: unknown). ``trim`` leaves that share out at each end
    (bench/bench_domain.py measures it; ``slam calibrate`` keeps the full range)."""
    refs = [len(r.strip()) for r in references]
    ratios = [len(c.strip()) / n if n else 0.0 for c, n in zip(candidates, refs, strict=True)]
    features = tuple(sorted(set(modules))) if modules is not None else None
    if not refs:
        return Domain(scope, modules=features)
    low_ref, high_ref = _range(refs, trim)
    low_ratio, high_ratio = _range(ratios, trim)
    low_value, high_value = _range(values, trim)
    return Domain(
        scope,
        (int(low_ref), int(high_ref)),
        (_down(low_ratio), _up(high_ratio)),
        (_down(low_value), _up(high_value)),
        features,
    )


def _range(values: Sequence[float], trim: float) -> tuple[float, float]:
    ordered = sorted(values)
    cut = int(len(ordered) * trim)
    return ordered[cut], ordered[len(ordered) - 1 - cut]


def _down(x: float) -> float:
    """Four decimals, never above ``x`` (the range must hold every calibration pair)."""
    return math.floor(x * 1e4) / 1e4


def _up(x: float) -> float:
    return math.ceil(x * 1e4) / 1e4


def band_domain_note(
    band_error: Mapping[str, object] | None,
    candidate: str,
    reference: str,
    score: Score,
    module: str = "",
) -> str | None:
    """Why bands with this measured error may not decide the pair of test module ``module``
    (None: they may)."""
    if not band_error:
        return None
    table = band_error.get("domain")
    if not isinstance(table, Mapping):
        return None  # domain unknown: decided as before (UNKNOWN, said once in the summary)
    return Domain.from_table(table).outside(candidate, reference, score.value, module)


def domain_unknown(measured: Mapping[str, Mapping[str, object]]) -> bool:
    """Bands with a measured error and no recorded domain."""
    band = measured.get("band_error")
    return bool(band) and band is not None and not isinstance(band.get("domain"), Mapping)


def scope_unknown(measured: Mapping[str, Mapping[str, object]]) -> bool:
    """Bands with a recorded domain that names no test modules: calibrated on labels without
    one, so every module's pairs are decided by them (``SCOPE_UNKNOWN``)."""
    band = measured.get("band_error") or {}
    table = band.get("domain")
    return isinstance(table, Mapping) and modules_of(table) is None
