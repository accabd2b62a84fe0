"""The gate's result as the verdict carries it: overall, per model, and each breach.

Apart from ``gate`` (which reads the verdict's rows) so the verdict can hold it typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_slam.records import Record

NOT_CONFIGURED = "not_configured"  # no gate rule applied: the gate says nothing, tests decide
WORDS = {
    "passed": "PASS",
    "failed": "FAIL",
    "incomplete": "INCOMPLETE",
    NOT_CONFIGURED: "not configured",
}
CLAUSE_END = re.compile(r" \(|; |, |\. ")  # a breach message's first clause is its gist


@dataclass
class Breach(Record):
    """One rule one model broke: what was measured against which limit."""

    model: str
    rule: str
    measured: float | None  # None: the figure was not measured
    limit: float
    message: str


@dataclass
class ModelGate(Record):
    """One candidate against every rule: passed when it broke none."""

    model: str
    passed: bool | None  # None: no gate rule applied
    breaches: list[Breach] = field(default_factory=list)

    NESTED = {"breaches": Breach}


@dataclass
class GateResult(Record):
    """The gate's outcome for the run: overall, per model, and session-level breaches."""

    passed: bool | None  # None when no rule applied (status "not_configured"): not a pass
    configured: bool
    models: list[ModelGate] = field(default_factory=list)
    session_breaches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: str = ""  # "passed" | "failed" | "incomplete" | "not_configured"
    incomplete: str | None = None  # why the run cannot be judged, when it cannot
    tests_failed: int = 0  # candidate tests that failed or errored, gate or no gate

    NESTED = {"models": ModelGate}  # an older report may lack ``status`` and ``incomplete``

    def label(self, model: str) -> str:
        """PASS / FAIL for a gated model, ``-`` when no gate is configured or not gated."""
        entry = next((m for m in self.models if m.model == model), None)
        if entry is not None and self.incomplete:
            return "INCOMPLETE"
        if entry is None or not self.configured:
            return "-"
        return "PASS" if entry.passed else "FAIL"

    def lines(self) -> list[str]:
        head = {
            "passed": "passed",
            "incomplete": "incomplete",
            NOT_CONFIGURED: "not configured",
        }.get(self.status, "FAILED")
        out = [f"pytest-slam gate {head}" + (f" ({self.incomplete})" if self.incomplete else "")]
        for entry in self.models:
            out.extend(f"  {entry.model}: {b.message}" for b in entry.breaches)
        out.extend(f"  session budget: {b}" for b in self.session_breaches)
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    @property
    def word(self) -> str:
        """PASS / FAIL / INCOMPLETE / not configured: the run's verdict as a headline says it."""
        return WORDS.get(self.status, "PASS" if self.passed else "FAIL")

    def gists(self) -> list[str]:
        """Each breach in a few words (``model: rule: measured vs limit``), for one-line verdicts."""
        out = [
            f"{m.model}: {CLAUSE_END.split(b.message, maxsplit=1)[0]}"
            for m in self.models
            for b in m.breaches
        ]
        return out + [
            f"session: {CLAUSE_END.split(b, maxsplit=1)[0]}" for b in self.session_breaches
        ]
