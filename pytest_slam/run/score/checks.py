"""After an opted-in test: price each call, pair it with its golden answer (``pairing.py``), score
each pair, and check the budgets. The result is a list of problems (the test fails with them) and
the Pairs the report shows. The test's own assertions already ran; these add what the swap knows.

A test's scorer and verdict rule are its plan (``plans.py``: built once per distinct configuration
in the run). Each score gets a verdict (``compare/decide.py``): equivalent, different, undecided,
or none when the project asked for none. An undecided pair goes down the cascade the project
configured (``then = ["judge", "review"]``): the judge (``judging.py``), then a stored ``slam
review`` verdict. A different pair fails the test; an undecided one does not (it is missing
evidence, counted in the report).

A judge's verdicts are kept in the ``judge`` dict of the pair's golden record, written when the
store flushes, so a CI run replays verdicts without the judge. In replay mode
(``--slm-record=none``) the golden files are never written: a verdict not cached yet is asked of
the judge, kept in memory for this run, and the run summary says how to cache it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_slam.compare.bands import DIFFERENT
from pytest_slam.compare.domain import SCOPE_UNKNOWN, UNKNOWN, domain_unknown, scope_unknown
from pytest_slam.compare.policy import EMPTY, Policy, decide_pair
from pytest_slam.compare.scorer import ScorerError
from pytest_slam.golden.reference import ReferenceService
from pytest_slam.metrics.metering import measure
from pytest_slam.records import JSON, Call, GoldenRecord, Pair, Score
from pytest_slam.run.score.judging import UNJUDGED, GoldenJudgeCache, JudgeModel, JudgeNotCached
from pytest_slam.run.score.pairing import pair_calls, wants_reference
from pytest_slam.run.score.plans import Plans
from pytest_slam.run.score.scoring import (
    ScoringPlan,
    request_schema,
    wants_json,
)
from pytest_slam.run.score.verdict import TestVerdict, merged_verdict
from pytest_slam.settings import TOML
from pytest_slam.swap.router import TestContext

if TYPE_CHECKING:  # the compare wing loads when a test is first scored
    from pytest_slam.compare.judge import MemoryJudgeCache
    from pytest_slam.compare.scorer import Scorer
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.metrics.cost import Prices
    from pytest_slam.review.verdicts import HumanVerdict

BUDGET_MARK = "slm_budget"


@dataclass
class Checker:
    """Everything one test process needs to judge a finished test."""

    reference: ReferenceService | None
    equivalence: dict[str, TOML]  # [tool.slam] equivalence
    prices: Prices
    judge: JudgeModel | None = None
    record_mode: str = "none"
    summary: list[str] = field(default_factory=list)  # the run's summary lines (shared)
    judge_memory: MemoryJudgeCache | None = None  # verdicts replay mode cannot write
    golden_store: GoldenStore | None = None  # the goldens without a reference (slam rescore)
    reviews: dict[str, list[HumanVerdict]] = field(default_factory=dict)  # by module, read once
    # (module, plan) -> the stated errors its audits withdrew (compare/audit.py), tested once
    withdrawn: dict[tuple[str, int], dict[tuple[str, str], str]] = field(default_factory=dict)
    not_cached: int = 0  # pairs whose judge verdict was not cached (slam rescore: not asked)
    scorer_timeout_s: float = 60.0  # [tool.slam] scorer_timeout_s: an outside scorer's deadline
    # [tool.slam] accept_uncertified_judge: count a judge's verdicts on a side slam calibrate
    # --evaluate could not certify (judge_error's pass_certified / fail_certified false)
    accept_uncertified_judge: bool = False
    plans: Plans = field(init=False)  # each test's scorer, built once per configuration

    def __post_init__(self) -> None:
        self.plans = Plans(self.equivalence, self.judge, self.scorer_timeout_s)

    def run(self, item: pytest.Item, ctx: TestContext, failed: bool) -> TestVerdict:
        """This test's verdict: merged over its runs under ``--slm-repeat``, else checked now."""
        merged = merged_verdict(item)
        return merged if merged is not None else self.check(item, ctx, failed)

    def check(self, item: pytest.Item, ctx: TestContext, failed: bool) -> TestVerdict:
        """Pair, score and budget-check the calls in ``ctx``."""
        verdict = TestVerdict(own_failure=failed)
        for call in ctx.calls:
            measure(ctx.model, call, self.prices)
        if self.reference is not None and wants_reference(item):
            pair_calls(self.reference, self.prices, ctx, verdict, failed)
        self._score(item, ctx, verdict, failed)
        self._budget(item, ctx, verdict)
        self._keep_judge_calls(ctx)
        return verdict

    # -- scoring ----------------------------------------------------------------------------------

    def _score(
        self, item: pytest.Item, ctx: TestContext, verdict: TestVerdict, failed: bool
    ) -> None:
        self.score_pairs(self.plans.for_item(item), ctx, verdict, failed)

    def score_pairs(
        self, plan: ScoringPlan, ctx: TestContext, verdict: TestVerdict, failed: bool = False
    ) -> None:
        """Score every pair with a golden answer, decide each score and send the undecided down
        the cascade; a different score is a problem of the test. A JSON answer called different
        in a test whose own assertions passed (not ``failed``) names the configuration that
        accepts each differing field (compare/accepting.py)."""
        from pytest_slam.compare.judge import JudgeUnjudged

        todo = [p for p in verdict.pairs if p.reference_text is not None]
        if not todo:
            return
        if plan.error is not None or plan.scorer is None or plan.tools is None:
            verdict.problems.append(f"scorer {plan.by!r}: {plan.error}")
            return
        for pair in todo:
            rec = verdict.records.get(pair.call_index)
            self._flag_empty_golden(ctx, pair)
            try:
                scores = self._score_pair(plan, ctx, pair, rec)
            except JudgeUnjudged as exc:  # unreadable twice: no verdict, never a 0
                self._note_unjudged(ctx, pair, exc)
                continue
            except JudgeNotCached:  # slam rescore: a verdict the judge never gave is not made up
                self.not_cached += 1
                continue
            except ScorerError as exc:  # the scorer's backend is down: the same for every pair
                verdict.problems.append(f"call {pair.call_index + 1}: scorer {plan.by!r}: {exc}")
                return
            sides = choices_of(ctx.calls[pair.call_index], pair, rec)
            for index, score in enumerate(scores):
                if pair.diverged_at is not None:
                    score.explanation = f"{diverged(pair)}; {score.explanation}"
                pair.scores.append(score)
                if score.verdict == DIFFERENT:
                    line = _failed(pair, score, sides, index)
                    if not failed:
                        schema = request_schema(ctx.calls[pair.call_index].request)
                        line = _with_accepting(line, plan, ctx.module, score, sides, index, schema)
                    verdict.problems.append(line)

    def _flag_empty_golden(self, ctx: TestContext, pair: Pair) -> None:
        """An empty golden answer decides nothing (``policy.EMPTY_REFERENCE``): said in the run's
        summary, once per answer, as it is recorded or replayed."""
        if (pair.reference_text or "").strip() or pair.reference_tool_calls:
            return
        just = self.reference is not None and (ctx.module, pair.key) in self.reference.rerecorded
        when = "recorded empty in this run" if just else "empty"
        line = (
            f"golden answer {when}: {ctx.nodeid} call {pair.call_index + 1} ({pair.golden_file}, "
            f"key {pair.key[:12]}): no pair is decided against it; record it again "
            f"(pytest --slm-record=all {ctx.nodeid}) or delete it"
        )
        if line not in self.summary:
            self.summary.append(line)

    def _score_pair(
        self, plan: ScoringPlan, ctx: TestContext, pair: Pair, rec: GoldenRecord | None
    ) -> list[Score]:
        """One score per choice: the candidate's choice i against the reference's choice i.

        A request with ``n`` > 1 gets ``n`` scores on its pair (the pair's equivalence is their
        mean, and each one called different fails the test); otherwise one score. Each score is
        decided by the one verdict policy (``compare/policy.decide_pair``).
        """
        from pytest_slam.review.pairs import answer_text

        call = ctx.calls[pair.call_index]
        cands, refs = choices_of(call, pair, rec)
        policy = self.policy_of(plan, ctx.module)
        for unknown, line in ((domain_unknown, UNKNOWN), (scope_unknown, SCOPE_UNKNOWN)):
            if unknown(plan.measured) and line not in self.summary:
                self.summary.append(line)
        scores = []
        for index, (cand, ref) in enumerate(itertools.zip_longest(cands, refs)):
            # a choice only one side has is the other side's blank answer, decided by the one
            # policy: no candidate choice is the certain "empty" different, no reference choice
            # decides nothing (re-record); never the scorer's bands, never measured on these
            cand_side, ref_side = cand or ("", None), ref or ("", None)
            evidence = _RunEvidence(self, plan, ctx, call, pair, rec, (cand_side, ref_side, index))
            texts_only = not (cand_side[1] or ref_side[1])
            score = decide_pair(
                policy,
                answer_text(*cand_side),
                answer_text(*ref_side),
                evidence,
                texts_only,
            )
            if cand is None or ref is None:
                only = "reference" if cand is None else "candidate"
                score.explanation = f"only the {only} has this choice: {score.explanation}"
            if max(len(cands), len(refs)) > 1:
                score.explanation = f"choice {index}: {score.explanation}"
            scores.append(score)
        return scores

    def policy_of(self, plan: ScoringPlan, module: str) -> Policy:
        """The verdict policy of a test's plan in test module ``module`` (``compare/policy.py``),
        with the stated errors this feature's audits withdrew (``compare/audit.py``)."""
        from pytest_slam.compare.audit import withdrawals

        policy = Policy(
            plan.by,
            plan.rule,
            tuple(plan.then),
            plan.measured,
            self.accept_uncertified_judge,
            asks_a_model(plan),
            module,
        )
        key = (module, id(plan))  # a plan lives as long as the run's Plans: one per configuration
        withdrawn = self.withdrawn.get(key)
        if withdrawn is None:
            audits = [a for a in (v.audited() for v in self._reviews(module)) if a is not None]
            withdrawn = withdrawals(audits, policy.errors_here) if audits else {}
            self.withdrawn[key] = withdrawn
        return replace(policy, withdrawn=withdrawn) if withdrawn else policy

    def _human_verdict(self, ctx: TestContext, key: str, answer: str) -> tuple[str, str] | None:
        """The stored ``slam review`` verdict on this answer: (verdict, why), or None.

        Several reviewers: the majority of "not worse" (win or tie) against worse; a tie is no
        verdict."""
        from pytest_slam.review.agreement import passed_by_human

        found = [
            v
            for v in self._reviews(ctx.module)
            if v.key == key and v.model == ctx.model.name and v.answer_hash == answer
        ]
        if not found:
            return None
        good = sum(passed_by_human(v.verdict) for v in found)
        if 2 * good == len(found):
            return None
        said = ", ".join(f"{v.reviewer or 'a reviewer'}: {v.verdict}" for v in found)
        return ("equivalent" if 2 * good > len(found) else DIFFERENT), f"review ({said})"

    def _reviews(self, module: str) -> list[HumanVerdict]:
        """The module's stored review verdicts, read once per module."""
        from pytest_slam.review.verdicts import ReviewError, read_verdicts, review_path

        if module not in self.reviews:
            store = self.store
            try:
                found = read_verdicts(review_path(store, module)) if store is not None else []
            except ReviewError as exc:
                self.summary.append(f"review verdicts not read: {exc}")
                found = []
            self.reviews[module] = found
        return self.reviews[module]

    def score_choice(
        self,
        plan: ScoringPlan,
        ctx: TestContext,
        call: Call,
        rec: GoldenRecord | None,
        cand: Choice,
        ref: Choice,
    ) -> Score:
        """Text with the test's scorer; tool calls, when either side made one, with the tool-call
        scorer. When both sides also wrote text, both count: the lower of the two values (an
        answer is as good as its worse part), with both explanations."""
        (c_text, c_tools), (r_text, r_tools) = cand, ref
        tools_only = plan.scorer is plan.tools
        if not (c_tools or r_tools or tools_only):
            return self._score_text(plan, ctx, call, rec, c_text, r_text)
        assert plan.tools is not None  # _score stops at a plan without scorers
        tools = plan.tools.score_calls(c_tools or [], r_tools or [])
        if tools_only or not (c_text.strip() and r_text.strip()):
            return tools
        text = self._score_text(plan, ctx, call, rec, c_text, r_text)
        return _lower(tools, text)

    def _score_text(
        self,
        plan: ScoringPlan,
        ctx: TestContext,
        call: Call,
        rec: GoldenRecord | None,
        candidate: str,
        reference: str,
    ) -> Score:
        scorer = plan.scorer
        assert scorer is not None  # _score stops at a plan without scorers
        # no scorer named, or by = "json": a request that carries a schema is also checked
        # against it (the table that accepts a field keeps that contract, compare/accepting.py)
        structural = (
            plan.json if plan.auto else scorer if getattr(scorer, "name", "") == "json" else None
        )
        if structural is not None and wants_json(call.request):
            return self._score_json(structural, call.request, candidate, reference)
        return self._in_context(scorer, ctx, call, rec, candidate, reference)

    def _in_context(
        self,
        scorer: Scorer,
        ctx: TestContext,
        call: Call,
        rec: GoldenRecord | None,
        candidate: str,
        reference: str,
    ) -> Score:
        """Score one pair, giving the scorer what its description says it needs (``about.py``):
        the pair's question, and for a scorer that calls a model the golden record's verdict
        cache (its Score says whether it was replayed from there)."""
        from pytest_slam.compare.about import describe

        needs = describe(scorer).needs
        if not needs & {"question", "model"}:
            return scorer.score(candidate, reference)
        context: dict[str, Any] = {}
        if "question" in needs:
            context["question"] = question_of(call.request)
        if "model" in needs:
            context["cache"] = self._judge_cache(ctx, rec) if rec is not None else None
            # a model is asked about the texts as the report and the golden file keep them
            # (secrets scrubbed): never shown a key, and `slam rescore`, which reads those
            # files, finds the verdict under the same key (judged_texts)
            candidate, reference, question = judged_texts(
                candidate, reference, context.get("question")
            )
            context |= {"question": question} if "question" in needs else {}
        made = len(self.judge.calls) if self.judge is not None else 0
        score = scorer.score(candidate, reference, **context)
        if "model" in needs:
            score.replayed = self.judge is None or len(self.judge.calls) == made
        return score

    @staticmethod
    def _score_json(
        scorer: Scorer, request: dict[str, JSON], candidate: str, reference: str
    ) -> Score:
        """A request that asked for JSON, with no scorer named: its fields compared (json), and
        the candidate checked against the request's own schema when it carries one."""
        from pytest_slam.compare.named import get_scorer
        from pytest_slam.compare.scorer import MissingExtra

        fields = scorer.score(candidate, reference)
        schema = request_schema(request)
        if schema is None:
            return fields
        try:
            valid = get_scorer("json_schema", schema=schema).score(candidate, reference)
        except (MissingExtra, ValueError):  # no jsonschema, or a schema it cannot read
            return fields
        return _lower(fields, valid)

    @property
    def store(self) -> GoldenStore | None:
        return self.reference.store if self.reference is not None else self.golden_store

    def _judge_cache(self, ctx: TestContext, rec: GoldenRecord) -> GoldenJudgeCache | None:
        store = self.store
        if store is None:
            return None
        if self.judge_memory is None:
            from pytest_slam.compare.judge import MemoryJudgeCache

            self.judge_memory = MemoryJudgeCache()
        writes = self.record_mode != "none" and self.reference is not None
        return GoldenJudgeCache(
            store, ctx.module, rec, ctx.test, writes, self.judge_memory, self._note_unsaved
        )

    def _keep_judge_calls(self, ctx: TestContext) -> None:
        """The judge's answered calls go on the test's outcome (role "judge"), priced like any
        call, after the budgets: they are the judge's latency and cost, not the candidate's. A call
        that never reached the judge is already a problem of the test, with its fix."""
        if self.judge is None or not self.judge.calls:
            return
        answered = [c for c in self.judge.calls if c.ok or c.error_kind == UNJUDGED]
        for call in answered:
            measure(self.judge.spec, call, self.prices)
        ctx.calls.extend(answered)
        self.judge.calls.clear()

    def _note_unjudged(self, ctx: TestContext, pair: Pair, exc: Exception) -> None:
        """Mark the judge's last call as giving no verdict, and name the pair in the summary."""
        if self.judge is not None and self.judge.calls:
            last = self.judge.calls[-1]
            last.error, last.error_kind = f"{UNJUDGED}: {exc}", UNJUDGED
        self.summary.append(
            f"unjudged (left out of the means, not scored 0): {ctx.nodeid} "
            f"call {pair.call_index + 1}: {exc}"
        )

    def _note_unsaved(self, module: str) -> None:
        if self.judge is not None and self.judge.offline:
            return
        line = (
            f"judge verdicts for {module} were asked but not cached (replay mode, "
            f"--slm-record=none); cache them with: pytest --slm-record=new {module}"
        )
        if line not in self.summary:
            self.summary.append(line)

    # -- budgets ----------------------------------------------------------------------------------

    def _budget(self, item: pytest.Item, ctx: TestContext, verdict: TestVerdict) -> None:
        from pytest_slam.metrics.budget import Budget, check_calls

        mark = item.get_closest_marker(BUDGET_MARK)
        if mark is None:
            return
        try:
            budget = Budget.from_kwargs(**mark.kwargs)
        except ValueError as exc:
            verdict.problems.append(str(exc))
            return
        breaches = check_calls(budget, [c.as_dict() for c in ctx.calls])
        verdict.breaches.extend(breaches)
        verdict.problems.extend(f"budget breached: {b}" for b in breaches)


def question_of(request: dict[str, JSON]) -> str | None:
    """The last user message of a chat request: what the judge is told was asked."""
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else None
    return None


Choice = tuple[str, "list[dict[str, JSON]] | None"]  # (text, tool calls) of one choice


def choices_of(
    call: Call, pair: Pair, rec: GoldenRecord | None
) -> tuple[list[Choice], list[Choice]]:
    """Both sides' choices in index order: the candidate's, and the reference's golden answer's."""
    ans = rec.answers[0] if rec is not None and rec.answers else None
    cands = [(call.text, call.tool_calls)]
    cands += [(c.get("text") or "", c.get("tool_calls")) for c in call.other_choices or ()]
    refs = [(pair.reference_text or "", pair.reference_tool_calls)]
    refs += [(c.get("text") or "", c.get("tool_calls")) for c in (ans and ans.other_choices) or ()]
    return cands, refs


def asks_a_model(plan: ScoringPlan) -> bool:
    """The test's scorer calls a model (the judge): not worth a call on an identical answer."""
    from pytest_slam.compare.about import describe

    return plan.scorer is not None and "model" in describe(plan.scorer).needs


def _lower(first: Score, second: Score) -> Score:
    """Two scores of one answer as one: the lower value (an answer is as good as its worse part),
    both explanations."""
    return Score(
        f"{first.scorer}+{second.scorer}",
        min(first.value, second.value),
        f"{_part(first.scorer)} {first.value:.2f}: {first.explanation}; "
        f"{_part(second.scorer)} {second.value:.2f}: {second.explanation}",
    )


def _part(scorer: str) -> str:
    """What a scorer compares, as its description says ("tool calls", "fields", "text")."""
    from pytest_slam.compare.named import describe_name

    return describe_name(scorer).compares


def _judge_evidence(scorer: str) -> bool:
    from pytest_slam.compare.about import JUDGE
    from pytest_slam.compare.named import describe_name

    return describe_name(scorer).evidence == JUDGE


def text_hash_of(answer: str) -> str:
    """The hash ``slam review`` keys a candidate answer by."""
    from pytest_slam.review.pairs import text_hash

    return text_hash(answer)


def _failed(pair: Pair, score: Score, sides: tuple[list[Choice], list[Choice]], index: int) -> str:
    """The problem line of a score called different; tool calls follow, side by side."""
    from pytest_slam.report.diffview import tool_calls_side_by_side

    line = f"call {pair.call_index + 1}: {why_different(score)}"
    cands, refs = sides
    cand = cands[index][1] if index < len(cands) else None
    ref = refs[index][1] if index < len(refs) else None
    if not (cand or ref):
        return line
    return "\n    ".join([line, *tool_calls_side_by_side(ref, cand)])


def _with_accepting(
    line: str,
    plan: ScoringPlan,
    module: str,
    score: Score,
    sides: tuple[list[Choice], list[Choice]],
    index: int,
    schema: dict[str, JSON] | None,
) -> str:
    """``line``, followed by the configuration that accepts each differing JSON field
    (compare/accepting.py); ``schema``: the request's own, which no field accepts breaking."""
    from pytest_slam.compare.accepting import accepting_for

    cands, refs = sides
    if index >= len(cands) or index >= len(refs):
        return line
    pair = (cands[index], refs[index])
    scorers = (plan.scorer, plan.json)
    extra = accepting_for(score.scorer, scorers, plan.tools, pair, module, schema)
    return "\n    ".join([line, *extra]) if extra else line


def diverged(pair: Pair) -> str:
    """What a pair matched by its place says: where the conversation left the reference's."""
    return (
        f"conversation diverged at turn {pair.diverged_at}: compared with the reference's "
        f"turn {pair.call_index + 1}"
    )


def diverged_lines(outcomes: list[dict[str, JSON]]) -> list[str]:
    """The summary's word on calls compared with the reference's turn at their place, if any."""
    found = [
        (o["nodeid"], p["call_index"] + 1)
        for o in outcomes
        for p in o.get("pairs", ())
        if p.get("diverged_at") is not None
    ]
    if not found:
        return []
    tests = len({nodeid for nodeid, _ in found})
    shown = ", ".join(f"{nodeid} call {turn}" for nodeid, turn in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return [
        f"conversations: {len(found)} call(s) in {tests} test(s) diverged from the reference's "
        f"conversation and were compared with the reference's turn at the same place ({shown}"
        f"{more})"
    ]


def why_different(score: Score) -> str:
    """Why a score is "different", by the evidence that said so."""
    if score.decided_by == EMPTY:
        return f"{score.explanation} (certain)"
    if score.decided_by in ("judge", "review") and not _judge_evidence(score.scorer):
        return (
            f"{score.decided_by} says different ({score.scorer} {score.value:.2f} was "
            f"undecided): {score.explanation}"
        )
    if score.decided_by == "bands" and score.fail_below is not None:
        return (
            f"equivalence {score.value:.2f} < {score.fail_below:.2f}, the fail band "
            f"({score.scorer}): {score.explanation}"
        )
    limit = score.threshold if score.threshold is not None else 0.0
    return f"equivalence {score.value:.2f} < {limit:.2f} ({score.scorer}): {score.explanation}"


def judged_texts(
    candidate: str, reference: str, question: str | None
) -> tuple[str, str, str | None]:
    """The texts a model-asking scorer (the judge) is given and its verdict is cached under: as
    the JSON report and the golden file keep them, secrets scrubbed, so a rescore of the report
    decides on the text the run decided on (issue 50)."""
    from pytest_slam.golden.redact import scrub_text

    said = scrub_text(question) if question is not None else None
    return scrub_text(candidate), scrub_text(reference), said


@dataclass
class _RunEvidence:
    """One choice's evidence in a run (``policy.Evidence``): the test's scorer, the cascade's
    judge through the golden file's verdict cache, the stored review; each asked only when the
    policy needs it."""

    checker: Checker
    plan: ScoringPlan
    ctx: TestContext
    call: Call
    pair: Pair
    rec: GoldenRecord | None
    sides: tuple[Choice, Choice, int]
    judge_missing: str | None = None

    def score(self) -> Score:
        cand, ref, _ = self.sides
        return self.checker.score_choice(self.plan, self.ctx, self.call, self.rec, cand, ref)

    def judge(self) -> Score | None:
        from pytest_slam.compare.judge import JudgeUnjudged
        from pytest_slam.review.pairs import answer_text

        if self.plan.judge is None:
            return None
        cand, ref, _ = self.sides
        candidate, reference = answer_text(*cand), answer_text(*ref)
        checker = self.checker
        try:
            return checker._in_context(
                self.plan.judge, self.ctx, self.call, self.rec, candidate, reference
            )
        except JudgeUnjudged as exc:  # unreadable twice: still undecided, never a 0
            checker._note_unjudged(self.ctx, self.pair, exc)
            self.judge_missing = (
                f"the judge gave no readable verdict ({exc}); ask it again (pytest "
                '--slm-record=new) or review the pair (then = [..., "review"])'
            )
        except JudgeNotCached:  # slam rescore: the judge never saw this pair
            checker.not_cached += 1
            self.judge_missing = (
                "the judge never saw this pair (rescore calls no model); cache its verdict "
                "with a run: pytest --slm-record=new"
            )
        return None

    def why_no_judge(self) -> str | None:
        return self.judge_missing

    def review(self) -> tuple[str, str] | None:
        from pytest_slam.review.pairs import answer_text

        cand, _, index = self.sides
        if index != 0:
            return None
        return self.checker._human_verdict(
            self.ctx, self.pair.key, text_hash_of(answer_text(*cand))
        )
