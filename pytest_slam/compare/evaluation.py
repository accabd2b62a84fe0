"""How the project's whole configured verdict does on labels it was not calibrated on, judge included.

Each labelled pair is decided as a run decides it: scored with the scorer its scope configures
(``[tool.slam.equivalence]``, updated by the pair's module table as the run does) and decided by
that scope's rule (``decide.Rule``: bands, a threshold, or the scorer's own verdict level); an
undecided pair goes down the scope's cascade (``then = ["judge"]``), where the judge grades it
with the pair's question, as the run's cascade does. ``by = "judge"`` has the judge decide every
pair of its scope. The judge is asked through :class:`JudgeSetup`: its verdicts go to the cache
given there (the command keeps them on disk, keyed as the run keys them), so a second evaluation
asks nothing. Where the cascade names the judge but none is set, its pairs count as undecided and
the result says how many (``judge_unset``). ``review`` in the cascade is not evaluated: the
labels are what it would say.

The figures (``verdict_error``): per evidence and overall, pairs decided and the pass and fail
errors with exact 95% Clopper-Pearson intervals. The judge is also certified as the bands are
(Learn then Test on its values against the labels, ``bandselect.choose_bands``): its
"equivalent" is certified when a certified pass band holds every pair it called equivalent, its
"different" likewise with the fail band. A side that is not certified leaves its pairs undecided
in the overall figures (the judge's own row keeps what it measured) unless the project accepts an
uncertified judge.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT, UNDECIDED, Bands
from pytest_slam.compare.bandselect import Targets, choose_bands
from pytest_slam.compare.calibrate import (
    NO_AIDS,
    Aids,
    CalibrationRefused,
    LabelledPair,
    score_column,
)
from pytest_slam.compare.decide import Rule, layered
from pytest_slam.compare.domain import SCOPE_UNKNOWN, UNKNOWN, domain_unknown, scope_unknown
from pytest_slam.compare.judge import Complete, JudgeCache
from pytest_slam.compare.named import describe_name
from pytest_slam.compare.policy import (
    NOT_CERTIFIED,
    OUTSIDE,
    Given,
    Need,
    Policy,
    decide_pair,
    steps,
)
from pytest_slam.compare.verdict_error import LabelVerdict, errors_by_evidence
from pytest_slam.errors import SlamError
from pytest_slam.records import Score

NOT_OPTIONS = ("by", "at_least", "fail_below", "then", "band_error", "judge_error", "modules")
SET_JUDGE = (
    "set [tool.slam] judge to a model spec (judge = 'openai:gpt-4o', or "
    "'http://127.0.0.1:8000/v1#MODEL') and run again"
)


@dataclass(frozen=True)
class Scope:
    """One scope's scorer, its options and its bands, and its cascade."""

    by: str
    options: dict[str, Any]
    bands: Bands
    then: tuple[str, ...] = ()
    # band_error as configured: its domain decides which pairs the bands may decide
    band_error: Mapping[str, Any] | None = None

    @property
    def by_judge(self) -> bool:
        return "model" in describe_name(self.by).needs


@dataclass
class JudgeSetup:
    """The project's judge for an evaluation: how to ask it, its name (in the cache key), where its
    verdicts are kept, and whether an uncertified judge's verdicts count."""

    complete: Complete
    model: str
    cache: JudgeCache | None = None
    accept_uncertified: bool = False
    asked: int = field(default=0, init=False)  # calls made to the judge
    replayed: int = field(default=0, init=False)  # pairs answered from the cache
    unjudged: int = field(default=0, init=False)  # pairs with no readable verdict
    seen: int = field(default=0, init=False)  # pairs given to the judge
    progress: Callable[[str], None] | None = None
    # calls in flight at once: the pairs the policy sends to the judge are asked together first
    # (their verdicts cached), then decided in order from the cache (issue 41)
    concurrency: int = 1
    warmed: int = field(default=0, init=False)  # pairs asked ahead: not replays of earlier runs
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def counted(self, messages: list[dict[str, str]]) -> str:
        with self._lock:  # asked from several threads at once (_ask_ahead)
            self.asked += 1
        return self.complete(messages)


def scope_of(equivalence: Mapping[str, Any], module: str) -> Scope:
    """The pair's scope: the top-level table updated by its module's table (as the run does).

    A module table naming another scorer does not inherit the top level's scorer options (a
    fuzzy ``method`` means nothing to ``semantic``), its bands, or an error measured for other
    bands (``decide.layered``, as the run merges them)."""
    table = {k: v for k, v in equivalence.items() if k != "modules"}
    modules = equivalence.get("modules")
    own = modules.get(module) if isinstance(modules, Mapping) else None
    if isinstance(own, Mapping):
        table = layered(table, own, NOT_OPTIONS, "fuzzy")
    try:
        bands = Bands(table.get("at_least"), table.get("fail_below"))
    except ValueError as exc:
        where = f"modules.{module!r}" if module in (modules or {}) else "the top-level table"
        raise CalibrationRefused(f"[tool.slam.equivalence] {where}: {exc}") from None
    options = {k: v for k, v in table.items() if k not in NOT_OPTIONS}
    then = tuple(str(s) for s in table.get("then") or [])
    band_error = table.get("band_error")
    band_error = band_error if isinstance(band_error, Mapping) else None
    return Scope(str(table.get("by", "fuzzy")), options, bands, then, band_error)


def evaluate(
    pairs: Sequence[LabelledPair],
    equivalence: Mapping[str, Any],
    judge: JudgeSetup | None = None,
    targets: Targets | None = None,
    aids: Aids = NO_AIDS,
) -> dict[str, Any]:
    """``{"pairs", "decided", "equivalent", "different", "undecided", "pass_error",
    "fail_error", "evidence": {name: {...}}}``, and ``"judge"`` when the judge decided pairs."""
    groups: dict[str, list[LabelledPair]] = {}
    for p in pairs:
        groups.setdefault(p.module, []).append(p)
    place = {id(p): i for i, p in enumerate(pairs)}
    tally = _Tally()
    for module, group in groups.items():
        scope = _evaluable_scope(equivalence, module, judge)
        tally.scopes.append(scope)
        decided = _decide_scope(scope, group, judge, aids, module)
        for p, (row, value, score) in zip(group, decided, strict=True):
            tally.add(scope, place[id(p)], row, value, score, judge_unset=judge is None)
    extra = tally.extra()
    if groups and "" not in groups:  # every label names its module: the features measured
        extra["modules"] = sorted(groups)
    measured = errors_by_evidence(tally.rows) | extra
    if judge is None or not judge.seen:
        return measured
    return _with_judge(tally, measured, extra, judge, targets or Targets())


def _evaluable_scope(
    equivalence: Mapping[str, Any], module: str, judge: JudgeSetup | None
) -> Scope:
    """The module's scope, refused when its scorer is the judge and no judge is set."""
    scope = scope_of(equivalence, module)
    if scope.by_judge and judge is None:
        raise CalibrationRefused(
            f"[tool.slam.equivalence] by = {scope.by!r} needs the judge to evaluate it: {SET_JUDGE}"
        )
    return scope


@dataclass
class _Tally:
    """What the pairs' verdicts add up to, scope after scope."""

    rows: list[LabelVerdict] = field(default_factory=list)
    judged: list[tuple[float, LabelVerdict]] = field(
        default_factory=list
    )  # the judge's value of each
    unasked: int = 0  # pairs the cascade would give the judge, where no judge is set
    outside: int = 0  # pairs the bands would decide, outside the domain they were measured on
    verdicts: dict[int, dict[str, Any]] = field(default_factory=dict)  # by place in ``pairs``
    scopes: list[Scope] = field(default_factory=list)
    places: list[int] = field(default_factory=list)  # each row's place in ``pairs``

    def add(
        self,
        scope: Scope,
        at: int,
        row: LabelVerdict,
        value: float | None,
        score: Score,
        judge_unset: bool,
    ) -> None:
        self.rows.append(row)
        self.places.append(at)
        if value is not None:
            self.judged.append((value, row))
        self.unasked += row.evidence is None and "judge" in scope.then and judge_unset
        self.outside += OUTSIDE in score.explanation
        self.verdicts[at] = {
            "verdict": score.verdict,
            "decided_by": score.decided_by,
            "why_undecided": score.why_undecided,
        }

    def extra(self) -> dict[str, Any]:
        """The figures beside the errors: pairs outside the domain, each pair's verdict, pairs
        the unset judge would have had, and whether a scope's domain is unknown."""
        extra: dict[str, Any] = {
            "outside_domain": self.outside,
            "verdicts": [self.verdicts[i] for i in sorted(self.verdicts)],
        }
        extra |= {"judge_unset": self.unasked} if self.unasked else {}
        if any(domain_unknown({"band_error": s.band_error or {}}) for s in self.scopes):
            extra["domain_unknown"] = True
        if any(scope_unknown({"band_error": s.band_error or {}}) for s in self.scopes):
            extra["scope_unknown"] = True
        return extra


def _with_judge(
    tally: _Tally,
    measured: dict[str, Any],
    extra: dict[str, Any],
    judge: JudgeSetup,
    targets: Targets,
) -> dict[str, Any]:
    """The figures once the judge's sides are certified on the pairs it decided: an uncertified
    side's verdicts left undecided (unless accepted), the judge's own row as measured."""
    # the pairs asked ahead were read back from the cache, but asked in this evaluation
    judge.replayed, judge.warmed = judge.replayed - judge.warmed, 0
    certified = certify_judge(tally.judged, targets)
    counted = tally.rows
    if not judge.accept_uncertified:
        counted = _uncertified_undecided(tally.rows, certified)
        left = [i for i, (a, b) in enumerate(zip(tally.rows, counted, strict=True)) if a is not b]
        certified["left_undecided"] = len(left)
        for i in left:  # the per-pair list says what the totals count: undecided, and why
            said = tally.verdicts[tally.places[i]]
            why = NOT_CERTIFIED.format(verdict=said["verdict"])
            said.update(verdict=UNDECIDED, decided_by=None, why_undecided=why)
    certified |= {"accepted": judge.accept_uncertified, "model": judge.model}
    certified |= {"asked": judge.asked, "replayed": judge.replayed, "unjudged": judge.unjudged}
    return (
        errors_by_evidence(counted) | extra | {"evidence": measured["evidence"], "judge": certified}
    )


def _uncertified_undecided(
    rows: list[LabelVerdict], certified: Mapping[str, Any]
) -> list[LabelVerdict]:
    """The rows with the judge's verdicts on an uncertified side made undecided."""
    drop = {
        v for v, ok in ((EQUIVALENT, certified["pass"]), (DIFFERENT, certified["fail"])) if not ok
    }
    return [
        replace(r, verdict=UNDECIDED, evidence=None)
        if r.evidence == "judge" and r.verdict in drop
        else r
        for r in rows
    ]


def judge_error_table(result: Mapping[str, Any], measured_on: str) -> dict[str, Any] | None:
    """What the evaluation measured of the judge, as ``[tool.slam.equivalence] judge_error``
    (config.MeasuredError): its errors and their upper bounds, on how many pairs, and whether each
    side was certified; a run puts them on the judge's verdicts and leaves an uncertified side's
    verdicts undecided unless ``accept_uncertified_judge``."""
    judged, judge = result.get("evidence", {}).get("judge"), result.get("judge")
    if not judged or judge is None:
        return None
    table: dict[str, Any] = {}
    for side in ("pass", "fail"):
        error = judged[f"{side}_error"]
        if error["of"]:
            table[side] = round(error["value"], 4)
            table[f"{side}_upper"] = round(error["high"], 4)
    table |= {"n": judged["decided"], "measured_on": measured_on}
    if result.get("modules"):  # the features it was measured on: its error holds there only
        table["domain"] = {"modules": list(result["modules"])}
    return table | {"pass_certified": bool(judge["pass"]), "fail_certified": bool(judge["fail"])}


def unset_line(unasked: int) -> str:
    return (
        f'{unasked} undecided pair(s) would go to the judge (then = ["judge"]), but none is set: '
        "they count as undecided; set [tool.slam] judge to measure it"
    )


def _decide_scope(
    scope: Scope,
    group: Sequence[LabelledPair],
    judge: JudgeSetup | None,
    aids: Aids,
    module: str = "",
) -> list[tuple[LabelVerdict, float | None, Score]]:
    """Each pair (of test module ``module``) decided by the one policy (``policy.decide_pair``)
    under its scope, the judge's value where it decided, and the pair's Score. The judge's sides
    are certified afterwards, on these very pairs (``certify_judge``), so here its verdicts count
    as given."""
    rule = Rule(
        scope.bands.at_least, scope.bands.fail_below, str(scope.options.get("mode", "grade"))
    )
    measured = {"band_error": scope.band_error} if scope.band_error else {}
    policy = Policy(scope.by, rule, scope.then, measured, True, scope.by_judge, module)
    values: Sequence[float | None]
    if scope.by_judge:
        values = [None] * len(group)  # asked per pair, only where the policy needs it
    else:
        try:
            values = score_column(scope.by, scope.options, group, aids)
        except (ValueError, ImportError) as exc:
            raise CalibrationRefused(f"[tool.slam.equivalence]: {exc}") from None
    if judge is not None and judge.concurrency > 1 and judge.cache is not None:
        _ask_ahead(judge, policy, scope, group, values)
    out: list[tuple[LabelVerdict, float | None, Score]] = []
    for p, value in zip(group, values, strict=True):
        evidence = _Evidence(scope, p, value, judge)
        try:
            score = decide_pair(policy, p.candidate, p.reference, evidence)
        except _Unjudged:
            score = Score(scope.by, 0.0, "the judge gave no readable verdict", verdict=UNDECIDED)
            score.why_undecided = score.explanation
        decided = score.verdict in (EQUIVALENT, DIFFERENT)
        row = LabelVerdict(p.label, score.verdict, score.decided_by if decided else None)
        judge_value = evidence.judged if score.decided_by == "judge" else None
        out.append((row, judge_value, score))
    return out


def judge_wanted(
    policy: Policy, scope: Scope, pair: LabelledPair, value: float | None
) -> Mapping[str, Any] | None:
    """The judge scorer's options when the policy (``policy.steps``) would ask the judge about
    the pair: the scope's own when it is the scorer, else the cascade's (``{}``); None when the
    cheaper rungs decide it first."""
    run = steps(policy, pair.candidate, pair.reference)
    given: Given = None
    try:
        while True:
            need = run.send(given)
            if need is Need.SCORE:
                if scope.by_judge:
                    return scope.options
                assert value is not None
                given = Score(scope.by, value)
            elif need is Need.JUDGE:
                return {}
            else:  # no stored review, no reason: the rest of the cascade
                given = None
    except StopIteration:
        return None


def _ask_ahead(
    judge: JudgeSetup,
    policy: Policy,
    scope: Scope,
    group: Sequence[LabelledPair],
    values: Sequence[float | None],
) -> None:
    """The pairs the policy will send to the judge, asked ``judge.concurrency`` at a time (the
    judge's broker, swap/broker.py, as the run's judge pairs are) before the pairs are decided in
    order: each verdict lands in the judge's cache, where the decision reads it (a pair already
    cached is not asked again)."""
    from pytest_slam.compare.judge import judge_key
    from pytest_slam.swap.broker import Job, Server

    wanted: list[tuple[Mapping[str, Any], LabelledPair]] = []
    keys: set[str] = set()  # a pair labelled twice is one request (two in flight both miss)
    for p, value in zip(group, values, strict=True):
        options = judge_wanted(policy, scope, p, value)
        if options is None:
            continue
        mode = str(options.get("mode", "grade"))
        key = judge_key(judge.model, mode, p.candidate, p.reference, p.question)
        cache = judge.cache
        cached = cache is not None and (
            cache.get(key) is not None or cache.get("unjudged-" + key) is not None
        )
        if key in keys or cached:
            continue
        keys.add(key)
        wanted.append((options, p))
    if not wanted:
        return
    counts = (judge.seen, judge.replayed, judge.unjudged)

    def ask(options: Mapping[str, Any], pair: LabelledPair) -> Callable[[Job[object]], object]:
        return lambda _: _judge_value(judge, options, pair)

    server = Server("judge", judge.concurrency)
    try:
        jobs = [server.submit(order, ask(*one)) for order, one in enumerate(wanted)]
        for job in jobs:
            job.result()  # its fault raised here, as the pool's map raised it
    finally:
        server.close()
    # the decision below reads each of these from the cache: count them there, once, as asked
    judge.seen, judge.replayed, judge.unjudged = counts
    judge.warmed += len(wanted)


class _Unjudged(SlamError, kind="calibrate"):
    """The judge, as the pair's own scorer, gave no readable verdict."""


@dataclass
class _Evidence:
    """One labelled pair's evidence (``policy.Evidence``): the scope's scorer value (scored in a
    batch beforehand, or the judge's, asked now), the cascade's judge, and no review (the labels
    are what a review would say)."""

    scope: Scope
    pair: LabelledPair
    value: float | None
    setup: JudgeSetup | None
    judged: float | None = None  # the judge's last value

    def score(self) -> Score:
        if not self.scope.by_judge:
            assert self.value is not None
            return Score(self.scope.by, self.value)
        assert self.setup is not None  # evaluate refused without one
        value = _judge_value(self.setup, self.scope.options, self.pair)
        if value is None:
            raise _Unjudged
        self.judged = value
        return Score(self.scope.by, value)

    def judge(self) -> Score | None:
        if self.setup is None:
            return None
        value = _judge_value(self.setup, {}, self.pair)
        if value is None:
            return None
        self.judged = value
        return Score("judge", value)

    def review(self) -> tuple[str, str] | None:
        return None

    def why_no_judge(self) -> str | None:
        return None


def _judge_value(judge: JudgeSetup, options: Mapping[str, Any], p: LabelledPair) -> float | None:
    """The judge's 0..1 value of one pair (None: no readable verdict, twice), asked once: a
    verdict in the cache is replayed."""
    from pytest_slam.compare.judge import JudgeScorer, JudgeUnjudged, judge_key
    from pytest_slam.compare.scorer import ScorerError

    mode = str(options.get("mode", "grade"))
    scorer = JudgeScorer(complete=judge.counted, model=judge.model, mode=mode, cache=judge.cache)
    # a pair the judge could not grade, twice, is remembered too: asked once, like the others
    unread = "unjudged-" + judge_key(judge.model, mode, p.candidate, p.reference, p.question)
    judge.seen += 1
    if judge.cache is not None and judge.cache.get(unread) is not None:
        judge.unjudged += 1
        judge.replayed += 1
        return None
    before = judge.asked
    try:
        score = scorer.score(p.candidate, p.reference, question=p.question)
    except JudgeUnjudged as exc:
        judge.unjudged += 1
        if judge.cache is not None:
            judge.cache.put(unread, {"unjudged": str(exc), "judge": judge.model, "mode": mode})
        return None
    except ScorerError as exc:
        raise CalibrationRefused(f"the judge could not be asked: {exc}") from None
    finally:
        if judge.progress is not None and judge.asked != before:
            judge.progress(f"judge: {judge.seen} pair(s) graded, {judge.asked} call(s) made")
    judge.replayed += judge.asked == before
    return score.value


def certify_judge(judged: Sequence[tuple[float, LabelVerdict]], targets: Targets) -> dict[str, Any]:
    """Learn then Test on the judge's values: the certified bands, and whether each side of what
    the judge decided lies inside them (every pair it called equivalent in the certified pass band;
    every pair it called different in the certified fail band)."""
    values = [v for v, _ in judged]
    choice = choose_bands("judge", values, [r.label for _, r in judged], targets)
    called = {
        EQUIVALENT: [v for v, r in judged if r.verdict == EQUIVALENT],
        DIFFERENT: [v for v, r in judged if r.verdict == DIFFERENT],
    }
    at_least, fail_below = choice.at_least, choice.fail_below
    return {
        "pass": at_least is not None and all(v >= at_least for v in called[EQUIVALENT]),
        "fail": fail_below is not None and all(v < fail_below for v in called[DIFFERENT]),
        "at_least": at_least,
        "fail_below": fail_below,
        "max_pass_error": targets.max_pass_error,
        "max_fail_error": targets.max_fail_error,
        "confidence": 1 - targets.delta,
    }


def _line(name: str, err: Mapping[str, Any], called: str) -> str:
    if not err["of"]:
        return f"{name}: no pair called {called}"
    return (
        f"{name}: {err['value']:.3f} [{err['low']:.3f}, {err['high']:.3f}] "
        f"({err['wrong']} of {err['of']} called {called})"
    )


def evaluation_text(result: Mapping[str, Any]) -> str:
    """The same figures for a terminal: overall, then each evidence, then the judge's standing."""
    n = result["pairs"]
    lines = [
        f"{n} labelled pairs: {result['equivalent']} equivalent, {result['different']} different, "
        f"{result['undecided']} undecided ({(n - result['undecided']) / n:.1%} decided)",
        _line("pass error", result["pass_error"], "equivalent"),
        _line("fail error", result["fail_error"], "different"),
    ]
    for name, figures in result.get("evidence", {}).items():
        lines.append(f"by {name}: {figures['decided']} decided")
        lines.append("  " + _line("pass error", figures["pass_error"], "equivalent"))
        lines.append("  " + _line("fail error", figures["fail_error"], "different"))
    if result.get("outside_domain"):
        lines.append(
            f"{result['outside_domain']} pair(s) outside what the bands were measured on "
            "(band_error.domain): not decided by the bands, sent down the cascade"
        )
    if result.get("domain_unknown"):
        lines.append(UNKNOWN)
    if result.get("scope_unknown"):
        lines.append(SCOPE_UNKNOWN)
    if result.get("judge_unset"):
        lines.append(unset_line(result["judge_unset"]))
    judge = result.get("judge")
    if judge is not None:
        lines.extend(judge_lines(judge))
    lines.append("(95% Clopper-Pearson intervals)")
    return "\n".join(lines)


def judge_lines(judge: Mapping[str, Any]) -> list[str]:
    """Where the judge stands: asked or replayed, certified or not, and what that does."""
    targets = (
        f"pass error <= {judge['max_pass_error']:g}, fail error <= {judge['max_fail_error']:g} "
        f"at {judge['confidence']:.0%}"
    )
    lines = [
        f"judge {judge['model']}: {judge['asked']} call(s) made, {judge['replayed']} pair(s) "
        f"replayed from its cache, {judge['unjudged']} unjudged (no readable verdict)"
    ]
    for side, key, band in (
        ("equivalent", "pass", "at_least"),
        ("different", "fail", "fail_below"),
    ):
        if judge[key]:
            lines.append(f"judge's {side}: certified ({targets}; {band} = {judge[band]:g})")
        else:
            lines.append(f"judge's {side}: NOT certified at {targets}")
    if judge["accepted"]:
        if not (judge["pass"] and judge["fail"]):
            lines.append("accept_uncertified_judge = true: its verdicts count all the same")
    elif judge.get("left_undecided"):
        lines.append(
            f"{judge['left_undecided']} pair(s) the judge decided stay undecided (uncertified); "
            "set [tool.slam] accept_uncertified_judge = true to count them anyway"
        )
    return lines
