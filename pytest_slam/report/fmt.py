"""Number formatting with units, shared by the terminal, Markdown and HTML renderings.

Every formatter takes ``None`` (not measured) and returns ``"-"``, so a missing number is never
shown as zero.
"""

from __future__ import annotations

import math

from pytest_slam.report.aggregate import ModelRow

NA = "-"


def ms(value: float | None) -> str:
    """Milliseconds below 10 s, seconds above: ``412 ms``, ``12.4 s``."""
    if value is None:
        return NA
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


def usd(value: float | None) -> str:
    """Dollars with enough digits to tell small self-hosted costs apart."""
    if value is None:
        return NA
    if value == 0:
        return "$0"
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:.2f}"
    return f"${_fixed(value)}" if value < 0.01 else f"${value:.3f}"


def ratio(value: float | None) -> str:
    """A cost ratio to the reference: ``0.0031x``."""
    if value is None:
        return NA
    return f"{_fixed(value)}x" if value < 0.1 else f"{value:.2f}x"


def _fixed(value: float) -> str:
    """Two significant digits without exponent notation: 0.000050, 0.0021."""
    if value <= 0:
        return f"{value:g}"
    digits = max(-math.floor(math.log10(value)) + 1, 0)
    return f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return NA if value is None else f"{value * 100:.0f}%"


def score(value: float | None) -> str:
    return NA if value is None else f"{value:.2f}"


def interval(value: float | None, low: float | None, high: float | None) -> str:
    """``0.71 [0.64, 0.78]``: a figure with its 95% interval (the figure alone without one)."""
    if value is None or low is None or high is None:
        return score(value)
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def rate(value: float | None, unit: str = "tok/s") -> str:
    return NA if value is None else f"{value:.0f} {unit}"


def joules(value: float | None) -> str:
    if value is None:
        return NA
    return f"{value:.2g} J" if value < 10 else f"{value:.0f} J"


def tests(row: ModelRow) -> str:
    """``passed/run``; skipped tests are not in the denominator."""
    return NA if row.is_reference else f"{row.tests_passed}/{row.tests_run}"


def pass_counts(row: ModelRow) -> str:
    """``71% (5/7)``: the pass rate with the counts it comes from (``-`` for the reference)."""
    if row.is_reference or not row.tests_run:
        return NA
    return f"{pct(row.pass_rate)} ({tests(row)})"


def tokens(row: ModelRow) -> str:
    """``prompt+completion``; ``-`` when none were counted (a curated reference records none)."""
    if not row.prompt_tokens and not row.completion_tokens:
        return NA
    mark = "~" if row.tokens_estimated else ""
    return f"{mark}{row.prompt_tokens:,}+{row.completion_tokens:,}"
