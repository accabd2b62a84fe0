"""Each test's scoring plan: its scorer, bands, cascade and options, built once per distinct
configuration in the run and shared by every test that asks for the same one (scorers keep no state
between scores).

A test's configuration is its ``slm_equivalence`` mark over its module's table over ``[tool.slam]
equivalence`` (``scoring.scoped_config``). A plan that cannot score (an unknown scorer, a judge
scorer with no judge model, bad bands) carries its ``error``: the checks make it the test's problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pytest

from pytest_slam.compare.decide import MEASURED_KEYS, Rule
from pytest_slam.compare.scorer import ScorerError
from pytest_slam.config import CASCADE, DEFAULT_BY
from pytest_slam.run.score.scoring import ScoringPlan, mark_table, scoped_config
from pytest_slam.settings import TOML

if TYPE_CHECKING:
    from pytest_slam.run.score.judging import JudgeModel

PLAN = pytest.StashKey["ScoringPlan"]()
_SET_JUDGE = (
    "set [tool.slam] judge to any model spec (judge = 'openai:gpt-4o', or "
    "'http://127.0.0.1:8000/v1#MODEL')"
)
NO_JUDGE = "by={by!r} needs a judge model: " + _SET_JUDGE
NO_CASCADE_JUDGE = f'then = ["judge"] needs a judge model: {_SET_JUDGE}'


@dataclass
class Plans:
    equivalence: dict[str, TOML]  # [tool.slam] equivalence
    judge: JudgeModel | None = None
    scorer_timeout_s: float = 60.0  # [tool.slam] scorer_timeout_s: an outside scorer's deadline
    # Plans by canonical (scorer, threshold, options): one scorer per distinct configuration.
    built: dict[str, ScoringPlan] = field(default_factory=dict)
    # The plan of a module's tests that carry no mark, found once: most tests of a run.
    unmarked: dict[str, ScoringPlan] = field(default_factory=dict)

    def for_item(self, item: pytest.Item) -> ScoringPlan:
        """The test's plan, kept on the item (repeats and pairs share it)."""
        plan = item.stash.get(PLAN, None)
        if plan is None:
            module = item.nodeid.split("::", 1)[0]
            plan = item.stash[PLAN] = self.for_module(module, mark_table(item))
        return plan

    def for_module(self, module: str, mark: dict[str, object] | None) -> ScoringPlan:
        """The plan of a test in ``module`` with ``mark``, shared by every test of the run that
        asks for the same scorer, bands, cascade and options."""
        if mark is None and module in self.unmarked:
            return self.unmarked[module]
        config = scoped_config(self.equivalence, module, mark)
        key = self._key(config)
        plan = self.built.get(key) if key is not None else None
        if plan is None:
            plan = self._build(config)
            if key is not None:
                self.built[key] = plan
        if mark is None and key is not None:  # a configuration that is no plain data: none kept
            self.unmarked[module] = plan
        return plan

    def _key(self, config: dict[str, object]) -> str | None:
        """A canonical JSON text of the scoring configuration; None when it has none (a ready
        Scorer object, an option that is not plain data, a ``complete`` other than the judge's)."""
        complete = config.get("complete")
        if complete is not None and (self.judge is None or complete != self.judge.complete):
            return None
        if not isinstance(config.get("by", ""), str):
            return None
        plain = {k: v for k, v in config.items() if k != "complete"}
        try:
            return json.dumps(plain, sort_keys=True)
        except (TypeError, ValueError):
            return None

    def _build(self, config: dict[str, object]) -> ScoringPlan:
        from pytest_slam.compare.bands import Bands

        options = dict(config)
        by, auto = _named(options.pop("by", None))
        at_least, fail_below = options.pop("at_least", None), options.pop("fail_below", None)
        then = options.pop("then", None) or []
        measured = {k: options.pop(k) for k in set(MEASURED_KEYS.values()) if k in options}
        needs, unknown = _needs_of(by)
        if "model" in needs and self.judge is not None:
            options.setdefault("complete", self.judge.complete)
            options.setdefault("model", self.judge.spec.name)
        threshold = at_least if isinstance(at_least, int | float) else None
        plan = ScoringPlan(getattr(by, "name", str(by)), threshold, auto=auto)
        plan.measured = {k: dict(v) for k, v in measured.items() if isinstance(v, dict)}
        try:
            bands = Bands(*cast("tuple[float | None, float | None]", (at_least, fail_below)))
        except ValueError as exc:
            plan.error = str(exc)
            return plan
        plan.rule = Rule(bands.at_least, bands.fail_below, str(options.get("mode", "grade")))
        plan.error = self._unusable(by, then, needs, options) or unknown
        if plan.error is None:
            plan.then = [str(step) for step in cast("list[object]", then)]
            self._equip(plan, by, options)
        return plan

    def _unusable(
        self, by: object, then: object, needs: frozenset[str], options: dict[str, object]
    ) -> str | None:
        """Why the cascade or the scorer's needs cannot be met in this run, first reason only."""
        if not (isinstance(then, list) and set(then) <= set(CASCADE)):
            return f'then = {then!r} must list "judge" and/or "review", cheapest first'
        if "judge" in then and self.judge is None:
            return NO_CASCADE_JUDGE
        if "model" in needs and "complete" not in options:
            return NO_JUDGE.format(by=by)
        return None

    def _equip(self, plan: ScoringPlan, by: object, options: dict[str, object]) -> None:
        """The plan's scorers: its own (an outside one under the deadline), the cascade's judge,
        the structural one of JSON answers when no scorer was named, the one of tool calls."""
        from pytest_slam.compare.named import get_scorer
        from pytest_slam.compare.plugged import Plugged
        from pytest_slam.compare.toolcalls import ToolCallScorer

        try:
            plan.scorer = get_scorer(by, **options)
            if isinstance(plan.scorer, Plugged):  # someone else's code: under a deadline
                plan.scorer.deadline_s = self.scorer_timeout_s
            if "judge" in plan.then and self.judge is not None:
                plan.judge = get_scorer(
                    "judge", complete=self.judge.complete, model=self.judge.spec.name
                )
            plan.json = get_scorer("json") if plan.auto else None
        except (ScorerError, ValueError, TypeError) as exc:
            plan.error = str(exc)
        else:  # answers with tool calls: a json scorer lends its options (ignore, tolerance)
            plan.tools = ToolCallScorer.like(plan.scorer)


def _named(by: object) -> tuple[object, bool]:
    """The scorer the configuration names, and whether none was (the default, ``auto``)."""
    if by is None:
        return DEFAULT_BY, True
    return (_by_name(by) if isinstance(by, str) else by), False


def _by_name(by: str) -> str:
    """A built-in scorer's name as the registry spells it; any other name as written."""
    from pytest_slam.compare.named import is_builtin

    return by.strip().lower() if is_builtin(by) else by.strip()


def _needs_of(by: object) -> tuple[frozenset[str], str | None]:
    """What the scorer ``by`` names needs (``about.py``), or why there is no such scorer."""
    from pytest_slam.compare.about import describe
    from pytest_slam.compare.named import scorer_class, unknown_scorer

    try:
        found = scorer_class(by) if isinstance(by, str) else by
        if not callable(getattr(found, "score", None)):
            return frozenset(), unknown_scorer(by)
        return describe(found).needs, None
    except (ValueError, TypeError) as exc:
        return frozenset(), str(exc)
