"""The scorer and the verdict rule one test uses, from its three scopes, narrowest first.

The test's ``slm_equivalence`` mark, else ``[tool.slam.equivalence.modules."<module>"]`` (the module
path as in the node id, as ``slam calibrate`` writes it), else ``[tool.slam.equivalence]``; each scope
updates the one below key by key (``decide.layered``: another scorer or other bands do not inherit
the error measured for the ones below). Pure data in, pure data out: the run (``plans.Plans``) and
``slam rescore`` (which has the mark as the report recorded it) read the same configuration the
same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from pytest_slam.compare.decide import Rule, layered
from pytest_slam.config import DEFAULT_BY, VERDICT_KEYS
from pytest_slam.records import JSON
from pytest_slam.settings import TOML

if TYPE_CHECKING:
    from pytest_slam.compare.scorer import Scorer
    from pytest_slam.compare.toolcalls import ToolCallScorer

EQUIVALENCE_MARK = "slm_equivalence"


@dataclass
class ScoringPlan:
    """The scorer one test uses for all its pairs, its verdict rule, or why it could not be built."""

    by: str
    at_least: float | None
    rule: Rule = field(default_factory=Rule)
    then: list[str] = field(default_factory=list)  # the cascade for undecided pairs
    auto: bool = False  # no scorer named: a request that asks for JSON is compared structurally
    scorer: Scorer | None = None  # None only with an error
    error: str | None = None
    tools: ToolCallScorer | None = None  # for answers with tool calls; None only with an error
    judge: Scorer | None = None  # the cascade's judge, when ``then`` names it
    json: Scorer | None = None  # the structural scorer of JSON answers, when ``auto``
    # band_error / judge_error of [tool.slam.equivalence]: what slam calibrate measured
    measured: dict[str, dict[str, JSON]] = field(default_factory=dict)


def mark_table(item: pytest.Item) -> dict[str, object] | None:
    """The test's ``slm_equivalence`` mark as one table (its first argument is ``by``)."""
    mark = item.get_closest_marker(EQUIVALENCE_MARK)
    if mark is None:
        return None
    table = dict(mark.kwargs)
    if mark.args:
        table["by"] = mark.args[0]
    return table


def plain_mark(item: pytest.Item) -> dict[str, JSON] | None:
    """The mark as plain JSON data for the report (None when it holds a Python object)."""
    table = mark_table(item)
    if table is None:
        return None
    try:
        plain: dict[str, JSON] = json.loads(json.dumps(table))
    except (TypeError, ValueError):
        return None
    return plain


def scoped_config(
    equivalence: Mapping[str, TOML], module: str, mark: Mapping[str, object] | None
) -> dict[str, object]:
    """The test's equivalence table: the top level, updated by its module's, then by its mark."""
    config: dict[str, object] = {k: v for k, v in equivalence.items() if k != "modules"}
    modules = equivalence.get("modules")
    scope = modules.get(module) if isinstance(modules, Mapping) else None
    for layer in (scope if isinstance(scope, Mapping) else None, mark):
        if layer is not None:
            config = layered(config, layer, VERDICT_KEYS, DEFAULT_BY)
    return config


def _output_format(request: Mapping[str, JSON]) -> Mapping[str, JSON] | None:
    """A chat request's ``response_format``, or a Responses request's ``text.format``."""
    fmt = request.get("response_format")
    if fmt is None and isinstance(request.get("text"), Mapping):
        fmt = request["text"].get("format")
    return fmt if isinstance(fmt, Mapping) else None


def wants_json(request: Mapping[str, JSON]) -> bool:
    """Whether a request asks for JSON output: json_object or json_schema (what
    ``client.chat.completions.parse()`` and ``client.responses.parse()`` send)."""
    fmt = _output_format(request)
    return fmt is not None and fmt.get("type") in ("json_object", "json_schema")


def request_schema(request: Mapping[str, JSON]) -> dict[str, JSON] | None:
    """The JSON Schema a json_schema output format carries, if any (chat nests it under
    ``json_schema``, Responses puts it in the format itself)."""
    fmt = _output_format(request)
    if fmt is None or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema", fmt)
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return dict(schema) if isinstance(schema, Mapping) else None
