"""The one model of ``[tool.slam]``: every key's type, default and rule, checked before anything starts.

Each key is declared once, in ``settings.Settings`` (its name, the type the run reads, its
default); ``SlamTable`` is built from it here, adding each key's rule and description (``_RULES``)
and the richer type of a key that is a table of its own (``_TYPES``). A sub-table's keys are declared once
too: by their reader where one reads them (``report.gate.Gate``, ``report.baseline.Tolerances``,
``metrics.budget.KEYS``, ``metrics.cost.PRICE_KEYS``), the table built from them; here for
``EquivalenceTable``, whose reader (``run.score.scoring``) imports its keys. That one model gives the
checks, the JSON Schema editors read (``slam config schema``, ``slam.schema.json``) and the README's
reference table, so they cannot drift apart. Sections that had their own rules keep their
messages: the model runs those checks (``models.check_table``, ``metering.validate_tables``,
``report.gate.check_tables``) on any value of the right shape. A run gets its plain-data
``Settings`` from ``SlamTable.to_settings``.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from pytest_slam.settings import MAX_CONCURRENCY, RECORD_MODES, Settings, SettingsError
from pytest_slam.swap.models import check_table
from pytest_slam.util.config_keys import did_you_mean

_STRICT = ConfigDict(extra="forbid", strict=True)
JsonDict = dict[str, JsonValue]  # a JSON Schema fragment, as pydantic's json_schema_extra takes

# [tool.slam.equivalence] is declared here, in EquivalenceTable, with these: the run reads them
# (run.score.scoring), never its own copy of the table's keys.
DEFAULT_BY = "fuzzy"  # the scorer when none is named
CASCADE = ("judge", "review")  # the evidence ``then`` may name, cheapest first

if TYPE_CHECKING:  # one of the listed names: a str to the type checker, checked by pydantic
    RecordMode = str
    Evidence = str
else:
    RecordMode = Literal[RECORD_MODES]
    Evidence = Literal[CASCADE]


def _alternatives(*others: JsonDict) -> Callable[[JsonDict], None]:
    """A field's schema that also admits other TOML shapes (a string for a list, say)."""

    def extra(schema: JsonDict) -> None:
        first = {k: schema.pop(k) for k in list(schema) if k not in ("title", "description")}
        schema["anyOf"] = [first, *others]

    return extra


_STRINGS: JsonDict = {"type": "array", "items": {"type": "string"}}
_COMMA_LIST: JsonDict = {"type": "string", "description": "comma-separated names"}


def _scorers() -> list[str]:
    """Built-in and installed scorer names."""
    from pytest_slam.compare.named import SCORERS, installed

    return [*SCORERS, *installed()]


class ModelTable(BaseModel):
    """``[tool.slam.models.NAME]``: a named model, run by the name ``NAME``."""

    model_config = _STRICT
    provider: str = Field(  # any name: models.check_table asks the engine registry
        "endpoint",
        description="the engine that serves it: a built-in one (see Model specs), an installed "
        "one (entry point group pytest_slam.engines) or an import path package.module:Class",
    )
    model: str | None = Field(None, description="model id sent upstream (default: NAME)")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, .../v1")
    base_urls: list[str] | None = Field(None, description="replicas of one deployment, in turn")
    api_key_env: str | None = Field(None, description="environment variable holding the key")
    engine: dict[str, Any] = Field(default_factory=dict, description="engine arguments")
    input_per_mtok: float | None = Field(None, ge=0, description="USD per 1M input tokens")
    output_per_mtok: float | None = Field(None, ge=0, description="USD per 1M output tokens")
    hourly_usd: float | None = Field(None, ge=0, description="self-hosted machine, USD per hour")
    timeout_s: float | None = Field(None, gt=0, description="candidate request timeout, seconds")
    responses: bool = Field(
        False, description="serves /v1/responses itself: Responses calls go as they are"
    )
    max_tokens_cap: int = Field(
        1024, ge=1, description="most output tokens a call without its own limit gets"
    )
    concurrency: int | None = Field(
        None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="calls in flight at once on this model (overrides [tool.slam])",
    )


class MeasuredDomain(BaseModel):
    """What a calibration was measured on (``slam calibrate`` writes it; ``compare/domain.py``):
    a pair outside any range is not decided by the bands its error belongs to."""

    model_config = ConfigDict(extra="forbid", strict=True)
    scope: str | None = Field(None, description="the labels: their test modules, or their file")
    modules: list[str] | None = Field(
        None,
        description="the test modules (features) it holds on: another module's pairs are not "
        "decided by it (unset: unknown, every module)",
    )
    reference_chars: list[int] | None = Field(
        None, min_length=2, max_length=2, description="[shortest, longest] reference, characters"
    )
    length_ratio: list[float] | None = Field(
        None, min_length=2, max_length=2, description="[lowest, highest] candidate/reference length"
    )
    values: list[float] | None = Field(
        None, min_length=2, max_length=2, description="[lowest, highest] score of the scorer"
    )


class MeasuredError(BaseModel):
    """What was measured of one evidence on labelled pairs (``slam calibrate``): its pass and
    fail errors with their 95% upper bounds. The run puts them on each verdict that evidence
    gives, and the report widens the pass rate's interval by them."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
    pass_: float | None = Field(
        None, alias="pass", ge=0, le=1, description="pass error: share wrongly called equivalent"
    )
    pass_upper: float | None = Field(None, ge=0, le=1, description="its 95% upper bound")
    fail: float | None = Field(
        None, ge=0, le=1, description="fail error: share wrongly called different"
    )
    fail_upper: float | None = Field(None, ge=0, le=1, description="its 95% upper bound")
    n: int | None = Field(None, ge=0, description="labelled pairs it was measured on")
    measured_on: str | None = Field(None, description="what it was measured on, and when")
    pass_certified: bool | None = Field(
        None,
        description="slam calibrate --evaluate certified its equivalent at the targets (false: "
        "a run leaves them undecided unless accept_uncertified_judge)",
    )
    fail_certified: bool | None = Field(
        None,
        description="slam calibrate --evaluate certified its different at the targets (false: "
        "a run leaves them undecided unless accept_uncertified_judge)",
    )
    domain: MeasuredDomain | None = Field(
        None,
        description="what the error was measured on: a pair outside it is not decided by this "
        "evidence (none: domain unknown, an older calibration; its error is assumed everywhere)",
    )


class EquivalenceTable(BaseModel):
    """``[tool.slam] equivalence``: the default scorer, its threshold and its options."""

    model_config = ConfigDict(extra="allow", strict=True)
    by: str = Field(
        default=DEFAULT_BY,
        description="scorer: built in (fuzzy, json, judge, ...: see Comparing answers), installed "
        "(entry point group pytest_slam.scorers) or an import path, package.module:Class",
    )
    at_least: float | None = Field(
        default=None, ge=0, le=1, description="the pass band: at or above it a pair is equivalent"
    )
    fail_below: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="the fail band (slam calibrate): below it a pair is different, between the "
        "bands undecided; unset, every pair below at_least is different",
    )
    then: list[Evidence] = Field(
        default_factory=list,
        description='the next evidence for undecided pairs, cheapest first: "judge", "review"',
    )
    band_error: MeasuredError | None = Field(
        None,
        description="the bands' measured errors (slam calibrate writes them): each verdict the "
        "bands give carries them; without it a band's verdict is unmeasured",
    )
    judge_error: MeasuredError | None = Field(
        None,
        description="the judge's measured errors on labelled pairs: each verdict the judge gives "
        "carries them; without it a judge's verdict is unmeasured",
    )
    modules: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per test module (path as in the node id): its own scorer and bands, "
        "written by slam calibrate where that module has labels enough",
    )

    @field_validator("by")
    @classmethod
    def _known_scorer(cls, by: str) -> str:
        from pytest_slam.compare.named import scorer_class

        try:
            scorer_class(by)
        except ValueError as exc:  # unknown, or an installed or imported one that fails to load
            hint = did_you_mean([by.strip().lower()], _scorers())
            why = str(exc).split("; ", 1)[-1] if str(exc).startswith("unknown") else str(exc)
            raise ValueError(
                f"[tool.slam.equivalence] by = {by!r} is not a scorer; {hint}{why}"
            ) from None
        return by

    @model_validator(mode="after")
    def _known_options(self) -> EquivalenceTable:
        from pytest_slam.compare.named import scorer_class, scorer_options

        try:
            scorer = scorer_class(self.by)
        except (ImportError, AttributeError, ValueError):  # its test says what failed
            return self
        known = set(scorer_options(scorer)) - {"complete"}
        unknown = sorted(set(self.model_extra or {}) - known)
        if unknown:
            raise ValueError(
                f"[tool.slam.equivalence] scorer {self.by!r} has no option {', '.join(unknown)}; "
                f"{did_you_mean(unknown, known)}it takes: {', '.join(sorted(known)) or 'none'}."
            )
        return self


SCOPE_KEYS = ("by", "modules")  # which scorer, and the narrower scopes
# the keys every scorer takes (its verdict rule), not a scorer's options
VERDICT_KEYS = tuple(key for key in EquivalenceTable.model_fields if key not in SCOPE_KEYS)


# [tool.slam.prices]' keys are declared where they are read (metrics.cost PRICE_KEYS, META_KEYS).
def _price_entry() -> type[BaseModel]:
    from pytest_slam.metrics.cost import PRICE_KEYS

    prices: dict[str, Any] = {key: (float | None, Field(None, ge=0)) for key in PRICE_KEYS}
    doc = "One model's list prices, USD per one million tokens."
    return create_model("PriceEntry", __config__=_STRICT, __doc__=doc, **prices)


if TYPE_CHECKING:

    class PriceEntry(BaseModel): ...

else:
    PriceEntry = _price_entry()


class _PriceRules(BaseModel):
    """What ``[tool.slam.prices]`` checks beyond its own keys: each model's table, TOML dates."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, PriceEntry] = Field(init=False)

    @field_validator("as_of", mode="before", check_fields=False)
    @classmethod
    def _date_text(cls, value: Any) -> Any:
        return value.isoformat() if isinstance(value, datetime.date) else value


def _price_table() -> type[_PriceRules]:
    from pytest_slam.metrics.cost import META_KEYS

    meta: dict[str, Any] = {
        key: (str | None, Field(default=None, description=text)) for key, text in META_KEYS.items()
    }
    doc = "``[tool.slam.prices]``: list price overrides (before genai-prices and the dated table)."
    return create_model("PriceTable", __base__=_PriceRules, __doc__=doc, **meta)


if TYPE_CHECKING:

    class PriceTable(_PriceRules): ...

else:
    PriceTable = _price_table()


# Gate rules and baseline tolerances are declared by their readers (report.gate.Gate and
# report.baseline.Tolerances: each field's name, type, default, and its rule or description in the
# field's metadata); their tables are built from them, so a new rule is a key here too.
def _gate_table() -> type[BaseModel]:
    from pytest_slam.report.gate import RULES, Gate
    from pytest_slam.report.section_checks import section_keys

    types = section_keys(Gate)
    fields: dict[str, Any] = {}
    for spec in dataclasses.fields(Gate):
        if spec.name in RULES:
            column, side, _ = RULES[spec.name]
            ceiling = 1 if side == "min" else None  # a share; other rules are open-ended
            text = f"{'at least' if side == 'min' else 'at most'} this {column}, per candidate"
            fields[spec.name] = (float | None, Field(None, description=text, ge=0, le=ceiling))
        else:
            described = Field(spec.default, description=spec.metadata.get("description"))
            fields[spec.name] = (types[spec.name], described)
    doc = "``[tool.slam.gate]``: rules every candidate must keep, or the run fails (exit 6)."
    return create_model("GateTable", __config__=_STRICT, __doc__=doc, **fields)


def _baseline_table() -> type[BaseModel]:
    from pytest_slam.report.baseline import Tolerances
    from pytest_slam.report.section_checks import section_keys

    types = section_keys(Tolerances)
    fields: dict[str, Any] = {
        spec.name: (
            types[spec.name],
            Field(spec.default, ge=0, description=spec.metadata["description"]),
        )
        for spec in dataclasses.fields(Tolerances)
    }
    doc = "``[tool.slam.baseline]``: how far a metric may move from the baseline to count."
    return create_model("BaselineTable", __config__=_STRICT, __doc__=doc, **fields)


if TYPE_CHECKING:  # built from their readers' declarations at import time (above)

    class GateTable(BaseModel): ...

    class BaselineTable(BaseModel): ...

else:
    GateTable = _gate_table()
    BaselineTable = _baseline_table()


def _budget_pattern() -> str:
    from pytest_slam.metrics.budget import KEY_PATTERN

    return KEY_PATTERN


def _budget_hint(table: Mapping[str, Any]) -> str:
    """``; did you mean 'p95_e2e_ms'?`` for a misspelt budget key, else nothing."""
    from pytest_slam.metrics.budget import KEYS

    hint = did_you_mean([key for key in table if key not in KEYS], KEYS).strip()
    return f"; {hint}" if hint else ""


# Each key of [tool.slam] is declared once, in ``settings.Settings``: its name, the type the run
# reads and its default. Here, only what the table adds: each key's rule and description, and the
# richer type of a key that is a table of its own. ``SlamTable`` is built from the two.
_KEY_OF = {"models": "candidates", "model_table": "models"}  # Settings field -> [tool.slam] key
_RUN_ONLY = {"configured", "golden_dir_legacy"}  # found by the run, never written in the table
_TYPES: dict[str, Any] = {  # keys whose type in the table is richer than the run's plain data
    "models": dict[str, ModelTable],
    "record": RecordMode,
    "equivalence": EquivalenceTable,
    "prices": PriceTable,
    "gate": GateTable,
    "baseline": BaselineTable,
}


def _rule(description: str, **rule: Any) -> dict[str, Any]:
    return {"description": description, **rule}


_RULES: dict[str, dict[str, Any]] = {  # each key's description, and its bounds or other shapes
    "candidates": _rule(
        "models to run (default: smollm2-135m)", json_schema_extra=_alternatives(_COMMA_LIST)
    ),
    "models": _rule(
        "`[tool.slam.models.NAME]` tables (or the candidates, when there are none)",
        json_schema_extra=_alternatives(_STRINGS, _COMMA_LIST),
    ),
    "reference": _rule('reference model spec; `"none"`: no pairing'),
    "golden_dir": _rule(
        "where golden files live (the old default `fixtures/slam` is used while it exists and "
        "this is not set)"
    ),
    "record": _rule("golden answers: none, new, all"),
    "samples": _rule("reference answers recorded per request", ge=1),
    "paths": _rule("folders whose tests opt in"),
    "equivalence": _rule("default scorer and threshold"),
    "judge": _rule("model spec of the LLM judge"),
    "accept_uncertified_judge": _rule(
        "count the judge's verdicts where `slam calibrate --evaluate` could not certify them"
    ),
    "audit_per_feature": _rule(
        "pairs per test module (feature) a run sets aside for `slam review --audit` from those "
        "bands or the judge decided: the audits re-test their stated error (0: none)",
        ge=0,
    ),
    "repeat": _rule("runs of each test per model", ge=1),
    "pass_fraction": _rule("share of runs that must pass", ge=0, le=1),
    "prices": _rule("list price overrides (before genai-prices and the dated table)"),
    "budget": _rule(
        "per-model limits, `<stat>_<metric> = limit` (`p95_e2e_ms = 2000`)",
        json_schema_extra={"propertyNames": {"pattern": _budget_pattern()}},
    ),
    "gate": _rule("gate rules"),
    "baseline": _rule("tolerances"),
    "report": _rule("JSON report path"),
    "html": _rule("HTML report path"),
    "engine_timeout_s": _rule("engine start timeout, seconds", gt=0),
    "reference_retries": _rule("retries of a failed reference call", ge=0),
    "reference_timeout_s": _rule("reference call timeout, seconds", gt=0),
    "scorer_timeout_s": _rule(
        "seconds a scorer from outside pytest-slam has for a score (0: no deadline); past it, "
        "the test fails naming it and it is not asked again",
        ge=0,
    ),
    "cap_factor": _rule("a call without an output limit gets this x the reference's tokens", gt=0),
    "cap_margin": _rule("plus this many tokens (at most max_tokens_cap)", ge=0),
    "max_tokens_cap": _rule(
        "every candidate's max_tokens_cap, the embedded model's included", ge=1
    ),
    "cache": _rule(
        "keep candidates' answers between runs and reuse them for the same model and request "
        "(off by default: a model behind the same name may change; latency is not measured anew)"
    ),
    "cache_ttl_s": _rule("seconds a kept candidate answer is reused", gt=0),
    "concurrency": _rule(
        "calls in flight at once on each candidate's server, the test's own call and answers "
        "fetched ahead included (1: one at a time; default: an endpoint's is found from its "
        "throughput, starting at 16; 8 for the embedded engine)",
        ge=1,
        le=MAX_CONCURRENCY,
    ),
    "alone_first": _rule(
        "the first calls to each candidate sent alone, nothing else in flight on its server "
        "(the latency a user meets; 0: none)",
        ge=0,
    ),
    "alone_every": _rule("then every this-many-th call sent alone (0: none past the first)", ge=0),
    "embeddings": _rule("model spec that answers embeddings (default: the original endpoint)"),
    "redirect_hosts": _rule("more hosts whose OpenAI calls are swapped (gateways; `*` patterns)"),
}


class _TableRules(BaseModel):
    """What ``[tool.slam]`` checks beyond each key's type: its shapes, and the sections' rules."""

    model_config = ConfigDict(extra="forbid", strict=True, title="tool.slam")
    if TYPE_CHECKING:  # the two keys to_settings reads by name (the fields come from Settings)
        candidates: list[str]
        models: dict[str, ModelTable]

    @model_validator(mode="before")
    @classmethod
    def _candidates_from_models(cls, data: Any) -> Any:
        """``models`` names the candidates when no [tool.slam.models.NAME] table exists (TOML
        cannot hold both a list and tables under one key); ``candidates`` wins when both do."""
        if isinstance(data, Mapping) and isinstance(data.get("models"), list | str):
            data = dict(data)
            listed = data.pop("models")
            data["candidates"] = data.get("candidates") or listed
        return data

    @field_validator("candidates", mode="before", check_fields=False)
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("models", mode="before", check_fields=False)
    @classmethod
    def _model_rules(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            for name, table in value.items():
                if isinstance(table, Mapping):
                    check_table(name, dict(table))
        return value

    @field_validator("prices", "budget", mode="before", check_fields=False)
    @classmethod
    def _metering_rules(cls, value: Any, info: ValidationInfo) -> Any:
        from pytest_slam.metrics.metering import validate_tables

        if not isinstance(value, Mapping):
            return value
        table = dict(value)
        if info.field_name == "prices":
            validate_tables(table, None)
            return value
        try:
            validate_tables(None, table)
        except ValueError as exc:
            raise ValueError(f"{exc}{_budget_hint(table)}") from None
        return value

    @field_validator("gate", "baseline", mode="before", check_fields=False)
    @classmethod
    def _report_rules(cls, value: Any, info: ValidationInfo) -> Any:
        from pytest_slam.report.gate import check_tables

        known = (GateTable if info.field_name == "gate" else BaselineTable).model_fields
        if not isinstance(value, Mapping) or set(value) <= set(known):  # unknown: one wording
            check_tables(*((value, None) if info.field_name == "gate" else (None, value)))
        return value

    def to_settings(self, configured: bool = True) -> Settings:
        """The plain-data Settings the run reads (xdist ships plain data)."""
        tables = ("equivalence", "prices", "gate", "baseline")
        plain = self.model_dump(exclude={"candidates", "models", *tables})
        plain.update(
            {
                name: getattr(self, name).model_dump(exclude_unset=True, by_alias=True)
                for name in tables
            }
        )
        model_table = {n: t.model_dump(exclude_unset=True) for n, t in self.models.items()}
        return Settings(
            models=list(self.candidates), model_table=model_table, configured=configured, **plain
        )


def _slam_table() -> type[_TableRules]:
    """``SlamTable``: one field per Settings field, in its order, with its rule from ``_RULES``."""
    hints = typing.get_type_hints(Settings)
    fields: dict[str, Any] = {}
    for spec in dataclasses.fields(Settings):
        if spec.name in _RUN_ONLY:
            continue
        key = _KEY_OF.get(spec.name, spec.name)
        typ = _TYPES.get(key, hints[spec.name])
        if isinstance(typ, type) and issubclass(typ, BaseModel):
            default: dict[str, Any] = {"default_factory": typ}
        elif spec.default_factory is not dataclasses.MISSING:
            default = {"default_factory": spec.default_factory}
        else:
            default = {"default": spec.default}
        fields[key] = (typ, Field(**default, **_RULES[key]))
    doc = "``[tool.slam]`` in pyproject.toml, merged with the ``--slm-*`` options."
    return create_model("SlamTable", __base__=_TableRules, __doc__=doc, **fields)


if TYPE_CHECKING:

    class SlamTable(_TableRules): ...

else:
    SlamTable = _slam_table()


def load(table: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None) -> Settings:
    """``[tool.slam]`` merged with the command line's overrides, validated: SettingsError."""
    if table is not None and not isinstance(table, Mapping):
        raise SettingsError(f"[tool.slam] = {table!r} must be a table of settings.")
    merged = {**(table or {}), **(overrides or {})}
    try:
        model = SlamTable.model_validate(merged)
    except ValidationError as exc:
        raise SettingsError("\n".join(error_lines(exc))) from None
    return model.to_settings(configured=table is not None)


# -- one line per problem ------------------------------------------------------------------------

Loc = tuple[str | int, ...]  # where in the table a problem is: keys and list indexes

_EXPECTED = {
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def error_lines(exc: ValidationError, where: Loc = ()) -> list[str]:
    """Each error as one line naming the key, the value and what it must be (``where``: the
    section a sub-model was validated for, as ``('models', 'qwen')``)."""
    unknown: dict[Loc, list[str]] = {}
    lines = []
    for error in exc.errors():
        loc = (*where, *error["loc"])
        if error["type"] == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
        elif error["type"] == "value_error":
            lines.append(str(error["ctx"]["error"]))
        else:
            lines.append(_type_line(loc, error))
    found = [_unknown_line(where, keys) for where, keys in unknown.items()]
    return list(dict.fromkeys(found + lines))


def _split(loc: Loc) -> tuple[str, str]:
    """``('models', 'qwen', 'base_urls', 1)`` -> ``('tool.slam.models.qwen', 'base_urls[1]')``."""
    last = max((i for i, part in enumerate(loc) if isinstance(part, str)), default=0)
    section = ".".join(["tool.slam", *map(str, loc[:last])])
    key = str(loc[last]) + "".join(f"[{i}]" for i in loc[last + 1 :])
    return section, key


_EXAMPLES = {
    "candidates": 'a list of model names, e.g. candidates = ["smollm2-135m", "qwen"]',
    "paths": 'a list of folders, e.g. paths = ["tests/llm"]',
    "models": "a table of [tool.slam.models.NAME] tables, or a list of model names",
    "equivalence": 'a table, e.g. equivalence = { by = "fuzzy", at_least = 0.7 }',
    "prices": "a table, e.g. prices = { gpt-4 = { input_per_mtok = 30, output_per_mtok = 60 } }",
    "budget": "a table, e.g. budget = { p95_e2e_ms = 2000 }",
}


def _type_line(loc: Loc, error: ErrorDetails) -> str:
    section, key = _split(loc)
    expected = _EXPECTED.get(error["type"]) or error["msg"].replace("Input should be ", "")
    if section == "tool.slam" and expected in ("a list", "a table"):
        expected = _EXAMPLES.get(key, expected)
    value = error["input"]
    shown = str(value).lower() if isinstance(value, bool) else repr(value)  # as TOML writes it
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"[{section}] {key} = {shown} must be {expected}."


def _unknown_line(where: Loc, keys: list[str]) -> str:
    from pytest_slam.util.config_keys import unknown_keys_line

    section = ".".join(["tool.slam", *map(str, where)])
    return unknown_keys_line(section, keys, _known_keys(where))


def _known_keys(where: Loc) -> list[str]:
    """The fields of the section at ``where``: walk the model, skipping table names."""
    model: type[BaseModel] = SlamTable
    parts = list(where)
    while parts:
        annotation = model.model_fields[str(parts.pop(0))].annotation
        if annotation is ModelTable or annotation == dict[str, ModelTable]:
            parts = parts[1:]  # the model's NAME
            model = ModelTable
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif tables := [a for a in get_args(annotation) if _is_table(a)]:  # an optional table
            model = tables[0]
        else:  # a plain-valued key: its section is the model reached so far
            break
    return [spec.alias or name for name, spec in model.model_fields.items()]


def _is_table(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
