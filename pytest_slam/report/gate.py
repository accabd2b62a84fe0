"""The CI gate: rules from ``[tool.slam.gate]`` checked against every candidate model.

The gate passes when every candidate keeps every configured rule and the session kept its
budgets. A rule whose metric was not measured is a breach ("not measured"), never a silent pass.
The reference row is never gated.

One rule is on without a ``[tool.slam.gate]`` table: a test that passed with no call the candidate
answered (outcome ``not_swapped``) is a breach, because the verdict must not rest on calls that did
not happen; ``allow_not_swapped = true`` turns it off. Another has no switch: a test whose
assertions passed although a candidate call failed (an error, a timeout, refused, cut off, given
up on: the product caught it) is a breach, ``candidate_failed``, named with the error kinds. (A
test that failed outright already fails the run.) And an undecided pair (the project asked for a
verdict, and neither its bands nor the cascade could give one) is missing evidence: a breach
naming the fix unless ``allow_undecided = true``.

A run that did not run to its end (Ctrl-C, ``-x``/``--maxfail``, a lost worker) or ran no test at
all is ``incomplete``: never passed, whatever its partial numbers say (``incomplete_reason``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_slam.records import JSON, Record
from pytest_slam.report import fmt
from pytest_slam.report.aggregate import ModelRow, Verdict
from pytest_slam.report.baseline import BaselineDiff
from pytest_slam.report.gate_result import NOT_CONFIGURED, Breach, GateResult, ModelGate
from pytest_slam.report.section_checks import ConfigError, read_section

SECTION = "tool.slam.gate"
INTERRUPTED = 2  # pytest.ExitCode.INTERRUPTED (this module does not import pytest)


def _rule(column: str, side: str, show: Callable[[float], str]) -> Any:
    """A rule's field: off (None) unless set; keeps ``column`` of each candidate row at or above
    (``"min"``, a share in 0..1) or at or below (``"max"``) the value."""
    return field(default=None, metadata={"rule": (column, side, show)})


def _switch(description: str) -> Any:
    """A switch's field: off unless set to true."""
    return field(default=False, metadata={"description": description})


def _share(value: float) -> str:
    return f"{value:.1%}"


def _mean(value: float) -> str:
    return f"{value:.3f}"


def _count(value: float) -> str:
    return f"{value:g} pair(s)"


@dataclass
class Gate(Record):
    """Thresholds a team commits; None means the rule is off.

    The one declaration of ``[tool.slam.gate]``: each key's name, type, default and rule or
    description; ``config.GateTable`` (the schema, the README) and ``from_config`` read them.
    """

    min_pass_rate: float | None = _rule("pass_rate", "min", _share)
    # over every call, a failed one counted 0: near misses that became runaways do not pass
    min_mean_equivalence: float | None = _rule("equivalence_all_calls", "min", _mean)
    max_p95_e2e_ms: float | None = _rule("e2e_p95_ms", "max", fmt.ms)
    max_cost_ratio: float | None = _rule("cost_ratio", "max", fmt.ratio)
    # decide on the lower bound of the bootstrap 95% interval (compare/uncertainty.py)
    min_equivalence_lower: float | None = _rule("equivalence_mean_low", "min", _mean)
    min_pass_rate_lower: float | None = _rule("pass_rate_low", "min", _share)
    # no more than this many decided pairs resting on unmeasured evidence (0: every verdict's
    # error measured, report/evidence.py); the pass rate's lower bound counting verdict errors
    max_unmeasured: float | None = _rule("pairs_unmeasured", "max", _count)
    min_pass_rate_verdict_lower: float | None = _rule("pass_rate_verdict_low", "min", _share)
    # None: on whenever a baseline is given (a baseline asked for is meant to be enforced)
    no_regression: bool | None = field(
        default=None,
        metadata={
            "description": "fail on a regression from --slm-baseline, or on a baseline that "
            "cannot be read (unset: on whenever --slm-baseline is given; false: report only)"
        },
    )
    allow_not_swapped: bool = _switch("a test that passed with no swapped call is not a breach")
    allow_undecided: bool = _switch("undecided pairs (missing evidence) are not a breach")

    @classmethod
    def from_config(cls, data: Mapping[str, JSON] | None) -> Gate:
        """From ``[tool.slam.gate]``; unknown keys and bad values raise ``ConfigError``."""
        gate = read_section(cls, SECTION, data)
        shares = [name for name, (_, side, _) in RULES.items() if side == "min"]  # all in 0..1
        for name in shares:
            value = getattr(gate, name)
            if value is not None and not 0 <= value <= 1:
                raise ConfigError(
                    f"[{SECTION}] {name} = {value} must be a fraction in 0..1, "
                    f"e.g. {name} = 0.9 for 90%"
                )
        return gate

    @property
    def configured(self) -> bool:
        return self.no_regression is True or any(getattr(self, r) is not None for r in RULES)

    def enforces(self, diff: BaselineDiff | None) -> bool:
        """Whether regressions from ``diff`` fail the gate: set, or unset with a baseline given."""
        return diff is not None if self.no_regression is None else self.no_regression


# rule -> (ModelRow field, "min" | "max", formatter), from Gate's rule fields
RULES: dict[str, tuple[str, str, Callable[[float], str]]] = {
    spec.name: spec.metadata["rule"] for spec in fields(Gate) if "rule" in spec.metadata
}


def evaluate(
    gate: Gate,
    verdict: Verdict,
    diff: BaselineDiff | None = None,
    session_budget_breaches: list[str] | None = None,
    incomplete: str | None = None,
) -> GateResult:
    """Check every candidate row against ``gate``; the result says what broke and by how much.

    ``incomplete`` (from ``incomplete_reason``): the run cannot be judged, so it does not pass.
    """
    entries = [_check_model(gate, row, diff) for row in verdict.models]
    session = _session_breaches(gate, diff, session_budget_breaches)
    notes = _notes(gate, diff)
    passed = all(e.passed for e in entries) and not session
    configured = _judged(gate, diff, session, entries)
    failed = sum(row.tests_failed + row.tests_errored for row in verdict.models)
    if not configured:  # no rule judged: neither passed nor failed
        entries = [ModelGate(e.model, None) for e in entries]
        if not incomplete:
            return GateResult(None, False, entries, [], notes, NOT_CONFIGURED, tests_failed=failed)
    status = _status(passed, incomplete)
    passed = passed and not incomplete
    return GateResult(passed, configured, entries, session, notes, status, incomplete, failed)


def _status(passed: bool, incomplete: str | None) -> str:
    """A judged run's word: an incomplete run is never passed, whatever its rules say."""
    if incomplete:
        return "incomplete"
    return "passed" if passed else "failed"


def _notes(gate: Gate, diff: BaselineDiff | None) -> list[str]:
    """What the result says beside the rules: a regression check asked for with no baseline to
    check against, and the baseline comparison's own notes."""
    if diff is None:
        if gate.no_regression:
            return ["no_regression is on but no baseline was given (--slm-baseline): not checked"]
        return []
    return list(diff.notes)


def _session_breaches(
    gate: Gate, diff: BaselineDiff | None, budget_breaches: list[str] | None
) -> list[str]:
    """The run's own breaches: its budgets, and an enforced baseline that could not be read."""
    session = list(budget_breaches or [])
    if diff is not None and diff.unreadable and gate.enforces(diff):
        session.append(
            f"no_regression: baseline {diff.baseline} could not be read, so nothing was "
            "compared; replace or delete it (--slm-baseline=auto then compares with the run "
            "before), or set [tool.slam.gate] no_regression = false to only report"
        )
    return session


def _judged(
    gate: Gate, diff: BaselineDiff | None, session: list[str], entries: list[ModelGate]
) -> bool:
    """Whether any rule judged the run: one configured, an enforced baseline, a session breach,
    or a rule that needs no ``[tool.slam.gate]`` (``ON_BY_DEFAULT``) that broke."""
    if gate.configured or gate.enforces(diff) or session:
        return True
    return any(b.rule in ON_BY_DEFAULT for e in entries for b in e.breaches)


def incomplete_reason(
    exitstatus: int, stopped: str | bool | None, tests_run: int, workers_lost: int = 0
) -> str | None:
    """Why this run's gate cannot pass whatever its numbers (None: it ran to its end)."""
    if exitstatus == INTERRUPTED:
        return "the run was interrupted"
    if stopped:
        return (
            f"the run stopped early: {stopped}"
            if isinstance(stopped, str)
            else "the run stopped early"
        )
    if workers_lost:
        return f"{workers_lost} xdist worker(s) lost"
    if tests_run == 0:
        return "no test ran"
    return None


def _check_model(gate: Gate, row: ModelRow, diff: BaselineDiff | None) -> ModelGate:
    breaches = []
    for rule, (attr, kind, show) in RULES.items():
        limit = getattr(gate, rule)
        if limit is not None:
            breach = _check_rule(row, rule, attr, kind, show, limit)
            breaches += [breach] if breach else []
    if gate.enforces(diff) and diff is not None and diff.for_model(row.model):
        changes = diff.for_model(row.model)
        what = "; ".join(c.describe() for c in changes[:3]) + ("; ..." if len(changes) > 3 else "")
        message = f"no_regression: {len(changes)} regression(s) vs baseline ({what})"
        breaches.append(Breach(row.model, "no_regression", len(changes), 0, message))
    if row.tests_not_swapped and not gate.allow_not_swapped:
        breaches.append(_not_swapped(row))
    if row.tests_candidate_failed:
        breaches.append(_candidate_failed(row))
    if row.pairs_undecided and not gate.allow_undecided:
        breaches.append(_undecided(row))
    return ModelGate(row.model, not breaches, breaches)


NOT_SWAPPED_RULE = "not_swapped"
CANDIDATE_FAILED_RULE = "candidate_failed"


def _candidate_failed(row: ModelRow) -> Breach:
    """Tests that passed although a candidate call failed: the product hid the failure."""
    tests = row.tests_run + row.tests_not_swapped
    kinds = "; ".join(f"{k}: {n} of {tests} tests" for k, n in row.candidate_failures.items())
    message = (
        f"{CANDIDATE_FAILED_RULE}: {kinds} ({row.tests_candidate_failed} test(s) passed their "
        f"assertions although {row.model} failed a call, so they count as failed; see each "
        "test's message)"
    )
    return Breach(row.model, CANDIDATE_FAILED_RULE, row.tests_candidate_failed, 0, message)


UNDECIDED_RULE = "undecided"
ON_BY_DEFAULT = (
    NOT_SWAPPED_RULE,
    CANDIDATE_FAILED_RULE,
    UNDECIDED_RULE,
)  # with no [tool.slam.gate]


def _undecided(row: ModelRow) -> Breach:
    """Pairs the project asked a verdict for and got none, by cause, each with its one fix
    (compare/policy.Cause): no evidence, the judge not certified, outside the calibrated
    features or domain, no judge verdict, an empty golden answer."""
    from pytest_slam.compare.policy import Cause, cause_named

    causes = row.undecided_causes or {Cause.NO_EVIDENCE.value: row.pairs_undecided}
    said = "; ".join(f"{n} {cause}: {cause_named(cause).fix}" for cause, n in causes.items())
    message = (
        f"{UNDECIDED_RULE}: {row.pairs_undecided} pair(s) of {row.model} are undecided: {said}; "
        f"or accept them with [{SECTION}] allow_undecided = true"
    )
    return Breach(row.model, UNDECIDED_RULE, row.pairs_undecided, 0, message)


def _not_swapped(row: ModelRow) -> Breach:
    """Tests that passed with no call the candidate answered: no evidence, so no pass."""
    message = (
        f"{NOT_SWAPPED_RULE}: {row.tests_not_swapped} test(s) passed without a call {row.model} "
        f"answered, so they say nothing about it (see the not-swapped note above); accept them "
        f"with [{SECTION}] allow_not_swapped = true"
    )
    return Breach(row.model, NOT_SWAPPED_RULE, row.tests_not_swapped, 0, message)


# What a rule's metric needs, said where it was not measured (a new team's gate, copied from the
# tutorial, failed every unpriced candidate with a bare "not measured": issue 52)
NEEDS = {
    "max_cost_ratio": (
        "; a cost ratio needs the prices of {model} and of the reference: set hourly_usd (its "
        "machine's USD per hour) in [tool.slam.models.{model}], or its per-token prices in "
        "[tool.slam.prices.{model}]; or leave max_cost_ratio out of the gate"
    ),
}


def _check_rule(
    row: ModelRow, rule: str, attr: str, kind: str, show: Callable[[float], str], limit: float
) -> Breach | None:
    measured = getattr(row, attr)
    if measured is None:
        needs = NEEDS.get(rule, "").format(model=row.model)
        message = f"{rule}: not measured (limit {show(limit)}){needs}"
        return Breach(row.model, rule, None, limit, message)
    broken = measured < limit if kind == "min" else measured > limit
    if not broken:
        return None
    word = "below the minimum" if kind == "min" else "above the maximum"
    message = f"{rule}: {show(measured)} is {word} {show(limit)}"
    return Breach(row.model, rule, measured, limit, message)


def apply_gate(verdict: Verdict, result: GateResult) -> Verdict:
    """Mark each candidate row PASS/FAIL and embed the result, in place; returns ``verdict``.

    In place because the renderers (table, JSON, HTML, Markdown) all read the one verdict.
    """
    for row in verdict.models:
        row.gate = result.label(row.model)
    verdict.gate = result
    return verdict


def check_tables(gate: Mapping[str, JSON] | None, baseline: Mapping[str, JSON] | None) -> None:
    """``[tool.slam.gate]`` and ``[tool.slam.baseline]`` checked at configure time, not at the end.

    Raises ``ConfigError`` (a ``ValueError``, which pytest_configure turns into a usage error).
    """
    from pytest_slam.report.baseline import Tolerances

    Gate.from_config(gate)
    Tolerances.from_config(baseline)
