"""Structured scorers: JSON structural equality and JSON Schema validation.

For product features that ask the model for JSON, "similar text" is the wrong question: what
matters is whether the fields a program reads hold the same values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from decimal import Decimal

from pytest_slam.compare.about import STRUCTURALLY_EQUAL, STRUCTURE, About
from pytest_slam.compare.jsontree import (
    NotJson,
    Path,
    format_path,
    leaves,
    matches,
    parse_answer,
    parse_pattern,
)
from pytest_slam.compare.scorer import MissingExtra, Scorer
from pytest_slam.records import JSON, Score

SHOWN_DIFFERENCES = 5
MEMO_PATHS = 100_000  # distinct paths remembered per scorer before the memo starts over


def _decimal(value: int | float) -> Decimal:
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def number_gap(a: int | float, b: int | float) -> float:
    """How far apart two JSON numbers are as the decimals they are written as: 0.85 and 0.9 are
    0.05 apart, where their binary floats are 0.05000000000000004 apart (so a ``tolerance`` of
    0.05, by hand or as offered, would not accept them)."""
    if all(not isinstance(x, float) or math.isfinite(x) for x in (a, b)):  # an int of any size
        return float(abs(_decimal(a) - _decimal(b)))  # inf where too far apart for a float
    return abs(a - b)


def _short(value: JSON) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


class JsonScorer(Scorer):
    """Fraction of JSON leaves (scalars and empty containers) that match, by path.

    Both answers are parsed (see ``jsontree.parse_answer``: with ``lenient=True``, the default,
    a fenced block or JSON after leading prose is accepted and the explanation says so). Leaves
    are compared by path over the union of both answers' paths, minus ``ignore`` patterns
    (``["$.id", "items[*].ts"]``). Numbers match within ``tolerance`` (absolute) or
    ``rel_tolerance``; ``true`` is never equal to ``1``. Arrays are compared by position.
    A candidate that is not JSON scores 0 with the parse error.
    """

    name = "json"
    about = About(STRUCTURE, calibratable=False, verdict_at=STRUCTURALLY_EQUAL, compares="fields")

    def __init__(
        self,
        *,
        ignore: Sequence[str] = (),
        tolerance: float = 0.0,
        rel_tolerance: float = 0.0,
        lenient: bool = True,
    ) -> None:
        if isinstance(ignore, str):
            ignore = [ignore]
        if tolerance < 0 or rel_tolerance < 0:
            raise ValueError("json scorer: tolerance and rel_tolerance must be >= 0")
        self.ignore = list(ignore)
        self._patterns = [parse_pattern(p) for p in self.ignore]
        self._memo: dict[Path, bool] = {}
        self.tolerance, self.rel_tolerance, self.lenient = tolerance, rel_tolerance, lenient

    def score(self, candidate: str, reference: str) -> Score:
        try:
            ref_value, _ = parse_answer(reference, lenient=self.lenient)
        except NotJson as err:
            return self.verdict(0.0, f"reference is not valid JSON: {err}")
        try:
            cand_value, how = parse_answer(candidate, lenient=self.lenient)
        except NotJson as err:
            return self.verdict(0.0, f"candidate is not valid JSON: {err}")
        value, explanation = self.compare(cand_value, ref_value)
        return self.verdict(value, f"{explanation} (candidate JSON {how})" if how else explanation)

    def compare(self, candidate: JSON, reference: JSON) -> tuple[float, str]:
        """Compare parsed values: (fraction of matching leaves, explanation)."""
        cand, ref = self._kept(leaves(candidate)), self._kept(leaves(reference))
        paths = list(ref) + [p for p in cand if p not in ref]
        if not paths:
            return 1.0, "every path is ignored"
        differing = [p for p in paths if not self.same(p, cand, ref)]
        matched = len(paths) - len(differing)
        if not differing:
            return 1.0, f"all {matched} leaves match"
        shown = "; ".join(self._difference(p, cand, ref) for p in differing[:SHOWN_DIFFERENCES])
        extra = len(differing) - SHOWN_DIFFERENCES
        more = f"; +{extra} more" if extra > 0 else ""
        return matched / len(paths), f"{matched}/{len(paths)} leaves match; {shown}{more}"

    def _kept(self, flat: dict[Path, JSON]) -> dict[Path, JSON]:
        if not self._patterns:
            return flat
        return {p: v for p, v in flat.items() if not self._ignored(p)}

    def _ignored(self, path: Path) -> bool:
        """Whether an ignore pattern covers ``path``; memoized, as answers repeat their paths."""
        hit = self._memo.get(path)
        if hit is None:
            if len(self._memo) > MEMO_PATHS:
                self._memo.clear()
            hit = self._memo[path] = any(matches(pt, path) for pt in self._patterns)
        return hit

    def compared(self, path: Path) -> bool:
        """Whether ``path`` is compared at all (no ignore pattern covers it)."""
        return not self._patterns or not self._ignored(path)

    def same(self, path: Path, cand: dict[Path, JSON], ref: dict[Path, JSON]) -> bool:
        """Whether both answers hold a matching leaf at ``path`` (tolerances applied)."""
        return path in cand and path in ref and self._equal(cand[path], ref[path])

    def _equal(self, a: JSON, b: JSON) -> bool:
        if isinstance(a, bool) or isinstance(b, bool):
            return type(a) is type(b) and a == b
        if isinstance(a, int | float) and isinstance(b, int | float):
            if a == b:
                return True
            try:
                if math.isclose(a, b, rel_tol=self.rel_tolerance, abs_tol=self.tolerance):
                    return True
            except OverflowError:  # an int too large for a float (a model may write one)
                pass
            return self.tolerance > 0 and number_gap(a, b) <= self.tolerance
        return type(a) is type(b) and a == b

    @staticmethod
    def _difference(path: Path, cand: dict[Path, JSON], ref: dict[Path, JSON]) -> str:
        where = format_path(path)
        if path not in cand:
            return f"{where} missing (expected {_short(ref[path])})"
        if path not in ref:
            return f"{where} unexpected ({_short(cand[path])})"
        return f"{where} expected {_short(ref[path])}, got {_short(cand[path])}"


class JsonSchemaScorer(Scorer):
    """1 when the candidate is JSON that validates against ``schema``; else 0 with the errors.

    The reference answer is not used: the schema is the contract. Needs ``jsonschema``
    (``pip install 'pytest-slam[schema]'``), imported when the scorer is built.
    """

    name = "json_schema"
    about = About(STRUCTURE, frozenset({"schema"}), False, STRUCTURALLY_EQUAL, compares="schema")

    def __init__(self, *, schema: dict[str, JSON] | str, lenient: bool = True) -> None:
        try:
            import jsonschema
        except ImportError:
            raise MissingExtra("json_schema", "jsonschema", "schema") from None
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as err:
                raise ValueError(f"json_schema scorer: schema is not valid JSON: {err}") from None
        if not isinstance(schema, dict):
            raise ValueError("json_schema scorer: schema must be a JSON object (a dict)")
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as err:
            raise ValueError(f"json_schema scorer: invalid schema: {err.message}") from None
        self.schema, self.lenient = schema, lenient
        self._validator = cls(schema)

    def score(self, candidate: str, reference: str) -> Score:
        try:
            value, how = parse_answer(candidate, lenient=self.lenient)
        except NotJson as err:
            return self.verdict(0.0, f"candidate is not valid JSON: {err}")
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        suffix = f" (candidate JSON {how})" if how else ""
        if not errors:
            return self.verdict(1.0, f"valid against the schema{suffix}")
        shown = "; ".join(
            f"{format_path(tuple(e.absolute_path))}: {e.message}"
            for e in errors[:SHOWN_DIFFERENCES]
        )
        return self.verdict(0.0, f"{len(errors)} schema error(s): {shown}{suffix}")
