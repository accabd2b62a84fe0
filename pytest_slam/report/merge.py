"""Merge the JSON reports of a suite's shards into the report and gate of the whole run.

Nothing is averaged: a shard's report holds every outcome with its calls and pairs, so the merge
takes the union of the outcomes and ``aggregate`` recomputes every figure over all of them (counts,
pass rates, bootstrap intervals over all requests, percentiles over all latency samples), exactly
as for one run of the same calls. The gate is then evaluated on the merged verdict as a run
evaluates it. Shards must be one run cut in parts: the same settings (the candidates selected, the
report paths aside), no test run for the same model in two shards. A shard's word is checked, not
taken: its file must match the digest its run sealed it with (seal.py), it may select only tests it
collected, and hold outcomes only of tests it selected. A digest can be recomputed by whoever edits
the file, so a shard must also carry a signature of it under the shard key the merge holds
(``Trust``); unsigned shards are let in only when the merge is told to (``--unsigned``), and the
merged report says which.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pytest_slam.errors import SlamError
from pytest_slam.metrics.budget import SessionBudget
from pytest_slam.records import JSON, Outcome
from pytest_slam.report.aggregate import ENGINE, RunInfo, Verdict, aggregate
from pytest_slam.report.budgets import session_budget_breaches
from pytest_slam.report.gate import Gate, apply_gate, evaluate, incomplete_reason
from pytest_slam.report.gate_result import GateResult
from pytest_slam.report.jsonreport import Report, ReportError, load_report
from pytest_slam.report.seal import KEY_ENV, KEY_FILE_ENV, verified
from pytest_slam.report.visits import Visits, merge_visits
from pytest_slam.util.gcpause import gc_paused

# Settings a shard may set for itself: the candidates it ran and where it wrote its reports.
PER_SHARD = ("models", "report", "html")
AGREED = ("reference", "plugin_version")  # run fields every shard must share


class MergeError(SlamError, kind="report"):
    """Shards that are not parts of one run (one line: which file, what, the fix)."""


EXIT_INCOMPLETE = 2  # pytest's exit status of an interrupted run: not the whole suite


@dataclass
class Merged:
    """The merged run: its verdict (gate applied), outcomes, visits and exit status before the
    gate; ``gate`` is None when no gate rule applied (as a run's)."""

    verdict: Verdict
    outcomes: list[Outcome]
    visits: Visits
    gate: GateResult | None
    exitstatus: int


@dataclass
class Trust:
    """How shards are trusted: ``key`` verifies their signatures (seal.py); ``unsigned`` lets a
    shard that carries no signature, or one this merge has no key for, in unverified (the merged
    report says so). ``unverified``: those let in, filled as the shards are read."""

    key: bytes | None = None
    unsigned: bool = False
    unverified: list[str] = field(default_factory=list)


UNSIGNED_FIX = (
    f"give every shard's job the shard key ({KEY_ENV}, or a file named by {KEY_FILE_ENV}) and "
    f"this merge the same key ({KEY_ENV}, {KEY_FILE_ENV} or --key-file), or pass --unsigned to "
    "merge shards unverified (the merged report then says so)"
)


def load_shards(paths: Sequence[str | os.PathLike[str]], trust: Trust) -> list[Report]:
    """Each shard's report, its signature checked against ``trust``; ``MergeError`` for a file
    that is not a report of a shard, or not signed with the merge's key."""
    reports = []
    with gc_paused():  # the shards' records live until the merge is written
        for path in paths:
            report = _load_shard(path)
            _check_signature(str(path), report, trust)
            if report.visits is not None:  # an earlier merge's unverified shards stay named
                trust.unverified.extend(report.visits.unverified)
            reports.append(report)
    if not reports:
        raise MergeError(
            "no shard reports given; pass the JSON files the shards' --slm-report wrote"
        )
    _check_one_run([str(p) for p in paths], reports)
    return reports


def _check_one_run(paths: list[str], reports: list[Report]) -> None:
    """Every shard carries its run's identity in its signed visits (run/workers/runid.py): a shard of
    another run (an older artifact) would merge its outcomes as this run's."""
    first = reports[0].visits.run if reports[0].visits else None
    for path, report in zip(paths[1:], reports[1:], strict=True):
        run = report.visits.run if report.visits else None
        if run != first:
            raise MergeError(
                f"{path} is a shard of another run than {paths[0]} (run {run or 'unnamed'}, not "
                f"{first or 'unnamed'}); merge only the reports of one run's shards (give its "
                "shards one SLAM_RUN_ID where the CI has no run id)"
            )


def _load_shard(path: str | os.PathLike[str]) -> Report:
    try:
        report = load_report(path, sealed=True)
    except ReportError as exc:
        raise MergeError(str(exc)) from None
    if report.visits is None:
        raise MergeError(
            f"{path} has no 'visits' (written by an older pytest-slam, or not by "
            "--slm-report); run the shard again with this pytest-slam"
        )
    _check_claims(str(path), report.visits, report.outcomes)
    # The merge recomputes every row from the outcomes: a shard's own rows (one per test and
    # model, as many as its outcomes) would only hold memory until the end.
    report.verdict.tests, report.verdict.models, report.verdict.reference = [], [], None
    return report


def _check_signature(path: str, report: Report, trust: Trust) -> None:
    """A shard signed with the merge's key passes; one whose signature does not match is refused
    whatever the flags (it was edited after signing, or signed with another key); an unsigned one,
    or one the merge has no key for, only with ``--unsigned``, and is then named in the report."""
    digest, signature, key = report.digest or "", report.signature, trust.key
    if signature is not None and key is not None:
        if verified(key, digest, signature):
            return
        raise MergeError(
            f"{path}: its signature does not match the shard key: it was changed after its run "
            "signed it, or signed with another key; pass the file the shard's run wrote, and give "
            f"this merge the key the shards' jobs had ({KEY_ENV}, {KEY_FILE_ENV} or --key-file)"
        )
    if trust.unsigned:
        trust.unverified.append(path)
        return
    why = (
        "is signed, but this merge has no shard key to verify it"
        if signature is not None
        else "carries no signature (its run had no shard key)"
    )
    raise MergeError(f"{path} {why}; {UNSIGNED_FIX}")


def unverified_note(names: Sequence[str]) -> str:
    """The merged report's note on shards let in by ``--unsigned``."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"merged with --unsigned: {len(names)} shard(s) not verified by a signature ({shown}); "
        "their outcomes are taken on their word, so a forged shard could change this verdict"
    )


def _check_claims(path: str, visits: Visits, outcomes: list[Outcome]) -> None:
    """A shard selects only what it collected and reports only what it selected: a test it
    claims but never ran, or an outcome of a test it never had, would change the whole verdict."""
    collected = set(visits.collected)
    unknown = [n for n in visits.selected if n not in collected]
    if unknown:
        raise MergeError(
            f"{path} selected {len(unknown)} test(s) it did not collect (first: {unknown[0]}); "
            "pass the report the shard's run wrote, unchanged"
        )
    selected = set(visits.selected)
    # A shard cut short (an xdist worker lost before it published its ids) may hold outcomes its
    # ids miss: its gate is INCOMPLETE anyway, and its digest still holds it as written.
    foreign = [o.nodeid for o in outcomes if o.outcome != ENGINE and o.nodeid not in selected]
    if foreign and visits.complete:
        raise MergeError(
            f"{path} holds {len(foreign)} outcome(s) of tests it did not select (first: "
            f"{foreign[0]}); pass the report the shard's run wrote, unchanged"
        )


def merge(reports: Sequence[Report], unverified: Sequence[str] = ()) -> Merged:
    """The shards as one run: outcomes unioned, every figure recomputed, the gate evaluated;
    ``unverified`` shards (let in by ``--unsigned``) named in a note of the verdict."""
    with gc_paused():  # the figures are built over every outcome, and all of them live on
        names = [r.path or f"#{i + 1}" for i, r in enumerate(reports)]
        run = merged_run([(n, r.verdict.run) for n, r in zip(names, reports, strict=True)])
        outcomes = merged_outcomes([(n, r.outcomes) for n, r in zip(names, reports, strict=True)])
        shards = zip(names, reports, strict=True)
        visits = merge_visits((n, r.visits or Visits()) for n, r in shards)
        verdict = aggregate(outcomes, run)
        if unverified:
            verdict.notes.append(unverified_note(unverified))
            visits.unverified = list(unverified)  # signed with the merge: a re-merge says so
        missing = _missing(visits)
        status = EXIT_INCOMPLETE if missing else visits.exitstatus
        why = _shard_incomplete(names, reports) or missing
        gate = _gate(verdict, outcomes, why, status)
    return Merged(verdict, outcomes, visits, gate, status)


def _missing(visits: Visits) -> str | None:
    """Why the shards are not the whole suite: collected tests that ran in no shard (a shard's
    report was not given, or a splitter dropped tests). The verdict of part of a suite is not the
    suite's, so the merge exits as an interrupted run would, its gate INCOMPLETE."""
    missing = visits.missing()
    if not missing:
        return None
    return (
        f"{len(missing)} collected test(s) ran in no shard (first: {missing[0]}): a shard's "
        "report is missing; merge every shard's report"
    )


def merged_run(runs: list[tuple[str, RunInfo]]) -> RunInfo:
    """One run's info: models by name in first-seen order, settings checked to agree, the span
    of the shards' times; sentences that differ (cost model, GPU telemetry) are all kept."""
    first_name, first = runs[0]
    settings = dict(first.settings)
    models = {m.name: m for _, r in runs for m in r.models}
    for name, run in runs[1:]:
        for key in AGREED:
            if getattr(run, key) != getattr(first, key):
                raise _disagree(
                    name, first_name, f"run.{key}", getattr(run, key), getattr(first, key)
                )
        for key in sorted(set(run.settings) | set(settings)):
            if key not in PER_SHARD and run.settings.get(key) != settings.get(key):
                raise _disagree(
                    name,
                    first_name,
                    f"run.settings.{key}",
                    run.settings.get(key),
                    settings.get(key),
                )
    settings["models"] = list(models)
    settings["report"] = settings["html"] = None  # the merge's own outputs are not a shard's
    started = [r.started for _, r in runs if r.started]
    finished = [r.finished for _, r in runs if r.finished]
    return RunInfo(
        models=list(models.values()),
        reference=first.reference,
        settings=settings,
        started=min(started) if started else None,
        finished=max(finished) if finished else None,
        pytest_version=_joined(r.pytest_version for _, r in runs),
        plugin_version=first.plugin_version,
        cost_assumption=_joined(r.cost_assumption for _, r in runs),
        gpu_telemetry=_joined(r.gpu_telemetry for _, r in runs),
    )


def _disagree(name: str, first: str, field: str, value: object, expected: object) -> MergeError:
    return MergeError(
        f"{name} is not a shard of the same run as {first}: {field} is {value!r}, not "
        f"{expected!r}; run every shard with the same pyproject.toml and options"
    )


def _joined(texts: Iterable[str]) -> str:
    seen: list[str] = []
    for text in texts:
        if text and text not in seen:
            seen.append(text)
    return "; ".join(seen)


def merged_outcomes(shards: list[tuple[str, list[Outcome]]]) -> list[Outcome]:
    """Every shard's outcomes; ``MergeError`` when two shards ran one test for one model.

    An engine's cold start is each shard's own (each started its engine): all are kept, the
    later shards' renamed so none hides another.
    """
    owner: dict[tuple[str, str, JSON], str] = {}
    out: list[Outcome] = []
    for index, (name, outcomes) in enumerate(shards):
        mine: set[tuple[str, str, JSON]] = set()
        for outcome in outcomes:
            if outcome.outcome == ENGINE:
                if index:
                    outcome.nodeid = f"{outcome.nodeid} (shard {index + 1})"
                out.append(outcome)
                continue
            key = (outcome.test, outcome.model, (outcome.repeat or {}).get("runs"))
            if key in owner and key not in mine:
                raise MergeError(
                    f"{name} and {owner[key]} both ran {outcome.nodeid} (overlapping shards); "
                    "give each test to one shard, or merge only one of these files"
                )
            owner.setdefault(key, name)
            mine.add(key)
            out.append(outcome)
    return out


def _shard_incomplete(names: list[str], reports: Sequence[Report]) -> str | None:
    """The first shard whose own gate was incomplete (interrupted, stopped, a worker lost): the
    whole run would have been. A shard that ran no swapped test is no reason on its own."""
    nothing_ran = incomplete_reason(0, None, 0)
    for name, report in zip(names, reports, strict=True):
        gate = report.verdict.gate
        if gate is not None and gate.incomplete and gate.incomplete != nothing_ran:
            return f"shard {name}: {gate.incomplete}"
    return None


def _gate(
    verdict: Verdict, outcomes: list[Outcome], shard_incomplete: str | None, exitstatus: int
) -> GateResult | None:
    """The gate as the run applies it (run/end/finish.py ``_gate``), on the merged verdict."""
    settings = verdict.run.settings
    gate_table = settings.get("gate")
    budget = settings.get("budget")
    gate = Gate.from_config(gate_table if isinstance(gate_table, dict) else None)
    plain = [o.as_dict() for o in outcomes] if budget else []
    limits = SessionBudget.from_config(budget if isinstance(budget, dict) else None)
    breaches = session_budget_breaches(limits, verdict.run.model_names, plain, verdict)
    tests_run = sum(
        row.tests_run + row.tests_not_swapped + row.tests_no_calls for row in verdict.models
    )
    why = shard_incomplete or incomplete_reason(exitstatus, None, tests_run)
    result = evaluate(gate, verdict, None, breaches, incomplete=why)
    apply_gate(verdict, result)
    return result if result.configured else None
