"""The tool-call scorer: did the candidate call the same functions with the same arguments?

For an agent, instructor in tool mode or structured output through tools, the answer *is* the tool
calls; their text is empty, so a text scorer would call any two of them equal.

Scoring (a value in [0, 1]):
- the calls of one answer are parallel calls (one assistant message), so order does not count:
  each candidate call is matched with a reference call of the same function name, best arguments
  first (greedy), and every call left without a partner scores 0;
- a matched pair scores the JSON scorer's fraction of matching argument leaves, with its options
  (``ignore`` paths are rooted at each call's arguments object: ``ignore=["$.request_id"]``);
  equal arguments score 1, arguments that are not JSON score 1 only when the texts are equal;
- the answer's value is the sum of its pairs' values over the larger number of calls. So different
  function names score 0, the same name with equal arguments 1, and a partial agreement in between.
Neither side calling a tool is 1 ("neither side called a tool"); one side alone calling one is 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pytest_slam.compare.about import STRUCTURALLY_EQUAL, STRUCTURE, About
from pytest_slam.compare.jsontree import NotJson, parse_answer
from pytest_slam.compare.scorer import Scorer
from pytest_slam.compare.structured import JsonScorer
from pytest_slam.records import JSON, Score

ToolCall = dict[str, JSON]  # one call as the API returns it: {"function": {"name", "arguments"}}
SHOWN_ARGS = 60


def name_of(call: ToolCall) -> str:
    """The function a tool call names (``function.name``; ``custom.name`` for custom tools)."""
    part = call.get("function") or call.get("custom") or call
    return str(part.get("name") or "")


def arguments_of(call: ToolCall) -> str:
    """The call's arguments as the model wrote them (a JSON text, or a custom tool's input)."""
    part = call.get("function") or call.get("custom") or call
    args = part.get("arguments", part.get("input", ""))
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def describe(call: ToolCall, limit: int = SHOWN_ARGS) -> str:
    """``get_weather({"city": "Paris"})``, arguments cut to ``limit`` characters."""
    args = " ".join(arguments_of(call).split())
    if len(args) > limit:
        args = args[: limit - 3] + "..."
    return f"{name_of(call)}({args})"


def parse_calls(text: str) -> list[ToolCall]:
    """A tool-call list from its JSON text (as the golden files keep it); "" is no call at all."""
    if not text.strip():
        return []
    value = json.loads(text)
    if isinstance(value, dict) and "tool_calls" in value:  # a whole assistant message
        value = value["tool_calls"] or []
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise ValueError("expected a JSON list of tool calls")
    return value


class ToolCallScorer(Scorer):
    """Function names and JSON arguments of two answers' tool calls (see the module docstring).

    ``score`` takes each side's tool calls as JSON text (a list, or "" for none), so it can be
    named like any scorer (``by="tool_calls"``); ``score_calls`` takes the parsed lists.
    """

    name = "tool_calls"
    about = About(STRUCTURE, frozenset({"tools"}), False, STRUCTURALLY_EQUAL, compares="tool calls")

    def __init__(
        self, *, ignore: Sequence[str] = (), tolerance: float = 0.0, rel_tolerance: float = 0.0
    ) -> None:
        self.arguments = JsonScorer(
            ignore=ignore, tolerance=tolerance, rel_tolerance=rel_tolerance, lenient=False
        )

    @classmethod
    def like(cls, scorer: object) -> ToolCallScorer:
        """The tool-call scorer that goes with a test's scorer: a JSON scorer lends its options."""
        if isinstance(scorer, ToolCallScorer):
            return scorer
        if isinstance(scorer, JsonScorer):
            return cls(
                ignore=scorer.ignore,
                tolerance=scorer.tolerance,
                rel_tolerance=scorer.rel_tolerance,
            )
        return cls()

    def score(self, candidate: str, reference: str) -> Score:
        try:
            ref = parse_calls(reference)
        except ValueError as err:
            return self.verdict(0.0, f"reference tool calls are not readable: {err}")
        try:
            cand = parse_calls(candidate)
        except ValueError as err:
            return self.verdict(0.0, f"candidate tool calls are not readable: {err}")
        return self.score_calls(cand, ref)

    def score_calls(self, candidate: Sequence[ToolCall], reference: Sequence[ToolCall]) -> Score:
        """Score two answers' tool-call lists."""
        if not candidate and not reference:
            return self.verdict(1.0, "neither side called a tool")
        if not candidate:
            return self.verdict(
                0.0, f"candidate called no tool; reference called {_list(reference)}"
            )
        if not reference:
            return self.verdict(
                0.0, f"reference called no tool; candidate called {_list(candidate)}"
            )
        pairs, cand_left, ref_left = self._match(candidate, reference)
        total = sum(value for value, _ in pairs)
        value = total / max(len(candidate), len(reference))
        return self.verdict(value, self._explain(pairs, cand_left, ref_left))

    def _match(
        self, candidate: Sequence[ToolCall], reference: Sequence[ToolCall]
    ) -> tuple[list[tuple[float, str]], list[ToolCall], list[ToolCall]]:
        """Greedy best-first matching of same-name calls: (pairs, unmatched cand, unmatched ref)."""
        options = [
            (self._pair(c, r), i, j)
            for i, c in enumerate(candidate)
            for j, r in enumerate(reference)
            if name_of(c) == name_of(r)
        ]
        options.sort(key=lambda o: (-o[0][0], o[1], o[2]))
        pairs, used_c, used_r = [], set(), set()
        for scored, i, j in options:
            if i not in used_c and j not in used_r:
                pairs.append(scored)
                used_c.add(i)
                used_r.add(j)
        cand_left = [c for i, c in enumerate(candidate) if i not in used_c]
        ref_left = [r for j, r in enumerate(reference) if j not in used_r]
        return pairs, cand_left, ref_left

    def _pair(self, cand: ToolCall, ref: ToolCall) -> tuple[float, str]:
        """One same-name pair: (argument agreement, what differs)."""
        name, c_args, r_args = name_of(ref), arguments_of(cand), arguments_of(ref)
        try:
            c_value, _ = parse_answer(c_args or "{}", lenient=False)
            r_value, _ = parse_answer(r_args or "{}", lenient=False)
        except NotJson:
            same = c_args == r_args
            return (1.0 if same else 0.0), f"{name}: arguments {'equal' if same else 'differ'}"
        value, explanation = self.arguments.compare(c_value, r_value)
        return value, f"{name}: {explanation}"

    @staticmethod
    def _explain(
        pairs: list[tuple[float, str]], cand_left: list[ToolCall], ref_left: list[ToolCall]
    ) -> str:
        parts = [text for value, text in pairs if value < 1.0]
        if len(cand_left) == 1 and len(ref_left) == 1:
            parts.append(f"called {describe(cand_left[0])} instead of {describe(ref_left[0])}")
        else:
            parts += [f"missing call {describe(r)}" for r in ref_left]
            parts += [f"unexpected call {describe(c)}" for c in cand_left]
        matched = sum(1 for value, _ in pairs if value >= 1.0)
        total = len(pairs) + max(len(cand_left), len(ref_left))
        head = f"{matched}/{total} calls match"
        return f"{head}; " + "; ".join(parts) if parts else head


def _list(calls: Sequence[ToolCall]) -> str:
    return ", ".join(describe(c) for c in calls)
