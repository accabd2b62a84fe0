"""The configuration that accepts a JSON difference: what a team pastes when a field the product
does not rely on differs from the reference's (issue 29).

The json scorer compares every leaf, so a near miss (``"confidence": 1`` against ``0.9``) fails a
test whose own assertions passed. Each differing field is named with the key that accepts it: a
number's gap as the json scorer's ``tolerance`` (absolute, for every number it compares), anything
else as an ``ignore`` path; as a ``[tool.slam.equivalence.modules."<module>"]`` table and as the
test's own ``slm_equivalence`` mark. No default tolerance: on the shared MT-Bench JSON answers a
small gap was as often a wrong value (a price read from another row, 0.5% off) as noise
(bench/README.md), so accepting one is the team's call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_slam.compare.jsontree import NotJson, format_path, leaves, parse_answer
from pytest_slam.compare.structured import JsonScorer, number_gap
from pytest_slam.compare.toolcalls import ToolCallScorer, arguments_of, name_of
from pytest_slam.records import JSON


@dataclass(frozen=True)
class Difference:
    """One leaf that differs: its path, and the gap when both sides are numbers (else None)."""

    path: str
    gap: float | None


def _number(value: JSON) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def differences(scorer: JsonScorer, candidate: str, reference: str) -> list[Difference]:
    """The leaves that differ between two JSON answers as ``scorer`` compares them (its ignore
    patterns and tolerances applied), by path; none when either answer is not JSON."""
    try:
        cand, _ = parse_answer(candidate, lenient=scorer.lenient)
        ref, _ = parse_answer(reference, lenient=scorer.lenient)
    except NotJson:
        return []
    c_leaves, r_leaves = leaves(cand), leaves(ref)
    found = []
    for path in [*r_leaves, *(p for p in c_leaves if p not in r_leaves)]:
        if not scorer.compared(path) or scorer.same(path, c_leaves, r_leaves):
            continue
        x = _number(c_leaves.get(path)) if path in c_leaves else None
        y = _number(r_leaves.get(path)) if path in r_leaves else None
        gap = number_gap(x, y) if x is not None and y is not None else None
        found.append(Difference(format_path(path), gap))
    return found


def tolerance_for(gap: float) -> float:
    """The shortest decimal at or above ``gap`` (``1 - 0.9`` is 0.09999999999999998: 0.1)."""
    for digits in range(1, 18):
        value = float(f"{gap:.{digits}g}")
        if value >= gap:
            return value
    return gap


def _toml_number(value: float) -> str:
    return repr(int(value)) + ".0" if value == int(value) else repr(value)


def accepting_lines(
    found: list[Difference],
    module: str,
    tolerance: float,
    ignore: list[str],
    matched: int | None = None,
) -> list[str]:
    """The lines that say how to accept ``found``: a pyproject table for ``module`` and the mark
    for one test; ``tolerance`` and ``ignore``: what the scorer already had; ``matched``: how many
    compared fields matched (0: nothing is offered, as accepting every field compares nothing)."""
    gaps = [d.gap for d in found if d.gap is not None]
    paths = [d.path for d in found if d.gap is None]
    if not found:
        return []
    if matched == 0:
        return [
            f"no field of the candidate's answer matches the reference's (0 of {len(found)}): "
            "no tolerance or ignore is offered, as accepting them all would compare nothing; "
            "if the product reads none of these fields, it needs no golden answer here: "
            "@pytest.mark.slm(reference=False)"
        ]
    need = max([tolerance, *(tolerance_for(g) for g in gaps)])
    every = list(dict.fromkeys([*ignore, *paths]))
    table = [f"[tool.slam.equivalence.modules.{json.dumps(module)}]", 'by = "json"']
    mark = ['by="json"']
    if gaps:
        named = ", ".join(d.path for d in found if d.gap is not None)
        table.append(f"tolerance = {_toml_number(need)}  # numbers within it match: {named}")
        mark.append(f"tolerance={_toml_number(need)}")
    if every:
        table.append(f"ignore = {json.dumps(every)}  # not compared")
        mark.append(f"ignore={json.dumps(every)}")
    return [
        "the product's own assertions passed; if it does not rely on these fields, accept them "
        'in pyproject.toml (by = "json" scores every call of the module as JSON, and checks a '
        "request's own schema):",
        *(f"  {line}" for line in table),
        f"or for this test only: @pytest.mark.slm_equivalence({', '.join(mark)})",
    ]


def _compared(scorer: JsonScorer, candidate: str, reference: str) -> int:
    """How many leaves ``scorer`` compares between two JSON answers (0 when either is not JSON)."""
    try:
        cand, _ = parse_answer(candidate, lenient=scorer.lenient)
        ref, _ = parse_answer(reference, lenient=scorer.lenient)
    except NotJson:
        return 0
    c_leaves, r_leaves = leaves(cand), leaves(ref)
    return sum(scorer.compared(p) for p in {*c_leaves, *r_leaves})


def _valid(schema: dict[str, JSON] | None, candidate: str) -> bool:
    """Whether ``candidate`` is valid against the request's ``schema`` (True with none, or when
    the schema cannot be checked here: the scorer said so already)."""
    if schema is None:
        return True
    from pytest_slam.compare.scorer import MissingExtra
    from pytest_slam.compare.structured import JsonSchemaScorer

    try:
        return JsonSchemaScorer(schema=schema).score(candidate, "").value == 1.0
    except (MissingExtra, ValueError):
        return True


def accepting_for(
    scorer_name: str,
    scorers: Sequence[object],
    tools: ToolCallScorer | None,
    sides: tuple[tuple[str | None, list[JSON] | None], tuple[str | None, list[JSON] | None]],
    module: str,
    schema: dict[str, JSON] | None = None,
) -> list[str]:
    """The lines that accept each differing JSON field of one pair called different by
    ``scorer_name`` (one scorer, or parts joined by "+": ``json+json_schema``, what a request
    with a schema gets, and ``tool_calls+json``): of a JSON answer (the first of ``scorers`` that
    compares JSON), and of the arguments of tool calls made in the same order with the same names
    (their paths rooted at each call's arguments, as the tool-call scorer reads ``ignore``); none
    when the candidate breaks the request's ``schema`` (no field accepts that) or otherwise."""
    (c_text, c_tools), (r_text, r_tools) = sides
    parts = set(scorer_name.split("+"))
    if "json_schema" in parts and not _valid(schema, c_text or ""):
        return []
    scorer, found, compared = _in_answer(parts, scorers, c_text or "", r_text or "")
    if "tool_calls" in parts and tools is not None and c_tools and r_tools:
        in_arguments = _in_arguments(tools.arguments, c_tools, r_tools)
        if in_arguments is None:
            return []  # another tool, or another number of calls: no field accepts that
        found, compared = found + in_arguments[0], compared + in_arguments[1]
        scorer = scorer or tools.arguments
    if scorer is None or not found:
        return []
    return accepting_lines(found, module, scorer.tolerance, scorer.ignore, compared - len(found))


def _in_answer(
    parts: set[str], scorers: Sequence[object], candidate: str, reference: str
) -> tuple[JsonScorer | None, list[Difference], int]:
    """The JSON answer's scorer (the first of ``scorers`` that compares JSON, when ``json`` is one
    of the parts), the fields it finds differing, and how many it compares."""
    if "json" not in parts:
        return None, [], 0
    scorer = next((s for s in scorers if isinstance(s, JsonScorer)), None)
    if scorer is None:
        return None, [], 0
    return (
        scorer,
        differences(scorer, candidate, reference),
        _compared(scorer, candidate, reference),
    )


def _in_arguments(
    arguments: JsonScorer, c_tools: list[JSON], r_tools: list[JSON]
) -> tuple[list[Difference], int] | None:
    """The differing fields of tool calls' arguments, call by call, and how many are compared;
    None when the calls name other tools or are another number of calls."""
    if [name_of(c) for c in c_tools] != [name_of(r) for r in r_tools]:
        return None
    found: list[Difference] = []
    compared = 0
    for cand, ref in zip(c_tools, r_tools, strict=True):
        c_args, r_args = arguments_of(cand) or "{}", arguments_of(ref) or "{}"
        found += differences(arguments, c_args, r_args)
        compared += _compared(arguments, c_args, r_args)
    return found, compared
