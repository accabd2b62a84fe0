"""Every ``[tool.slam]`` key with a wrong type or value: one line naming it, exit 4, no traceback.

Real pytest runs of real projects. The cases are table-driven and a test checks the table covers
every key of every section of the model, so a key added later without a case fails here.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pytest_slam.cli import main
from pytest_slam.config import (
    BaselineTable,
    EquivalenceTable,
    GateTable,
    ModelTable,
    PriceEntry,
    PriceTable,
    SlamTable,
)

M = '[tool.slam.models.m]\nbase_url = "http://127.0.0.1:9/v1"\n'  # a valid model table to spoil

# (TOML after [tool.slam], what the one line must contain)
WRONG_TYPES: dict[str, tuple[str, str]] = {
    "candidates": ("candidates = 5", "[tool.slam] candidates = 5 must be a list of model names"),
    "models": ("models = 5", "[tool.slam] models = 5 must be a table"),
    "reference": ("reference = 5", "[tool.slam] reference = 5 must be a string"),
    "golden_dir": ("golden_dir = 42", "[tool.slam] golden_dir = 42 must be a string"),
    "record": ("record = 1", "[tool.slam] record = 1 must be 'none', 'new' or 'all'"),
    "samples": ('samples = "three"', "[tool.slam] samples = 'three' must be a whole number"),
    "paths": ('paths = "tests"', "[tool.slam] paths = 'tests' must be a list of folders"),
    "equivalence": ('equivalence = "fuzzy"', "[tool.slam] equivalence = 'fuzzy' must be a table"),
    "judge": ("judge = 3", "[tool.slam] judge = 3 must be a string"),
    "accept_uncertified_judge": (
        'accept_uncertified_judge = "yes"',
        "[tool.slam] accept_uncertified_judge = 'yes' must be true or false",
    ),
    "audit_per_feature": (
        'audit_per_feature = "two"',
        "[tool.slam] audit_per_feature = 'two' must be a whole number",
    ),
    "repeat": ("repeat = 2.5", "[tool.slam] repeat = 2.5 must be a whole number"),
    "pass_fraction": (
        'pass_fraction = "all"',
        "[tool.slam] pass_fraction = 'all' must be a number",
    ),
    "prices": ('prices = "cheap"', "[tool.slam] prices = 'cheap' must be a table"),
    "budget": ("budget = 7", "[tool.slam] budget = 7 must be a table"),
    "gate": ("gate = 5", "[tool.slam.gate] must be a table of settings, got int"),
    "baseline": ("baseline = 3", "[tool.slam.baseline] must be a table of settings, got int"),
    "report": ("report = true", "[tool.slam] report = true must be a string"),
    "html": ("html = 1", "[tool.slam] html = 1 must be a string"),
    "engine_timeout_s": (
        'engine_timeout_s = "x"',
        "[tool.slam] engine_timeout_s = 'x' must be a number",
    ),
    "reference_retries": (
        "reference_retries = 1.5",
        "[tool.slam] reference_retries = 1.5 must be a whole",
    ),
    "reference_timeout_s": (
        "reference_timeout_s = []",
        "[tool.slam] reference_timeout_s = [] must be a number",
    ),
    "scorer_timeout_s": (
        'scorer_timeout_s = "1m"',
        "[tool.slam] scorer_timeout_s = '1m' must be a number",
    ),
    "cap_factor": ('cap_factor = "x"', "[tool.slam] cap_factor = 'x' must be a number"),
    "cap_margin": ("cap_margin = 1.5", "[tool.slam] cap_margin = 1.5 must be a whole number"),
    "max_tokens_cap": (
        'max_tokens_cap = "big"',
        "[tool.slam] max_tokens_cap = 'big' must be a whole number",
    ),
    "embeddings": ("embeddings = 3", "[tool.slam] embeddings = 3 must be a string"),
    "concurrency": (
        "concurrency = 0",
        "[tool.slam] concurrency = 0 must be greater than or equal to 1",
    ),
    "alone_first": ('alone_first = "3"', "[tool.slam] alone_first = '3' must be a whole number"),
    "alone_every": ("alone_every = 2.5", "[tool.slam] alone_every = 2.5 must be a whole number"),
    "cache": ('cache = "yes"', "[tool.slam] cache = 'yes' must be true or false"),
    "cache_ttl_s": ("cache_ttl_s = -1", "[tool.slam] cache_ttl_s = -1 must be greater than 0"),
    "redirect_hosts": (
        'redirect_hosts = "api.x.com"',
        "[tool.slam] redirect_hosts = 'api.x.com' must be a list",
    ),
    "models.responses": (
        M + 'responses = "yes"',
        "[tool.slam.models.m] responses = 'yes' must be true or false",
    ),
    "models.concurrency": (
        M + 'concurrency = "many"',
        "[tool.slam.models.m] concurrency = 'many' must be a whole number",
    ),
    "models.max_tokens_cap": (
        M + 'max_tokens_cap = "big"',
        "[tool.slam.models.m] max_tokens_cap = 'big' must be a whole number",
    ),
    "models.provider": (
        "[tool.slam.models.m]\nprovider = 1",
        "[tool.slam.models.m] provider=1; use one of",
    ),
    "models.model": (M + "model = 1", "[tool.slam.models.m] model = 1 must be a string"),
    "models.base_url": (
        "[tool.slam.models.m]\nbase_url = 5",
        "[tool.slam.models.m] base_url = 5 must be a string",
    ),
    "models.base_urls": (
        '[tool.slam.models.m]\nbase_urls = "http://x/v1"',
        "[tool.slam.models.m] base_urls = 'http://x/v1' must be a list",
    ),
    "models.api_key_env": (
        M + "api_key_env = 1",
        "[tool.slam.models.m] api_key_env = 1 must be a string",
    ),
    "models.engine": (
        M + 'engine = "fast"',
        "[tool.slam.models.m] engine = 'fast' must be a table",
    ),
    "models.input_per_mtok": (
        M + 'input_per_mtok = "1"',
        "[tool.slam.models.m] input_per_mtok = '1' must be a number",
    ),
    "models.output_per_mtok": (
        M + "output_per_mtok = true",
        "[tool.slam.models.m] output_per_mtok = true must be a number",
    ),
    "models.hourly_usd": (
        M + 'hourly_usd = "0.1"',
        "[tool.slam.models.m] hourly_usd = '0.1' must be a number",
    ),
    "models.timeout_s": (
        M + 'timeout_s = "x"',
        "[tool.slam.models.m] timeout_s = 'x' must be a number",
    ),
    "equivalence.by": (
        "equivalence = { by = 5 }",
        "[tool.slam.equivalence] by = 5 must be a string",
    ),
    "equivalence.at_least": (
        'equivalence = { at_least = "high" }',
        "[tool.slam.equivalence] at_least = 'high' must be a number",
    ),
    "equivalence.fail_below": (
        'equivalence = { fail_below = "low" }',
        "[tool.slam.equivalence] fail_below = 'low' must be a number",
    ),
    "equivalence.then": (
        'equivalence = { then = ["jury"] }',
        "[tool.slam.equivalence] then",
    ),
    "equivalence.band_error": (
        'equivalence = { band_error = { pass = "low" } }',
        "[tool.slam.equivalence.band_error] pass = 'low' must be a number",
    ),
    "equivalence.judge_error": (
        "equivalence = { judge_error = { pas = 0.04 } }",
        "[tool.slam.equivalence.judge_error] has unknown keys ['pas']; did you mean 'pass'?",
    ),
    "equivalence.modules": (
        "equivalence = { modules = 3 }",
        "[tool.slam.equivalence] modules = 3 must be a table",
    ),
    "prices.as_of": ("prices = { as_of = [1] }", "[tool.slam.prices] as_of = [1] must be a string"),
    "prices.source": ("prices = { source = 1 }", "[tool.slam.prices] source = 1 must be a string"),
    "prices.MODEL": ("prices = { gpt-4 = 3 }", "[tool.slam.prices] 'gpt-4': expected a table like"),
    "prices.input_per_mtok": (
        'prices = { gpt-4 = { input_per_mtok = "x" } }',
        "input_per_mtok must be a number of USD >= 0, got 'x'",
    ),
    "prices.output_per_mtok": (
        "prices = { gpt-4 = { output_per_mtok = true } }",
        "output_per_mtok must be a number of USD >= 0, got True",
    ),
    "budget.KEY": (
        'budget = { p95_e2e_ms = "x" }',
        "[tool.slam.budget]: p95_e2e_ms must be a number >= 0, got 'x'",
    ),
}


def _derived(section: str, model: type) -> dict[str, tuple[str, str]]:
    """Gate rules and baseline tolerances are declared by their readers: one case per key, made
    from the model, in the readers' own wording (report.config.check_section)."""
    cases = {}
    for name, field in model.model_fields.items():
        kinds = {bool: "bool", int: "whole number"}
        kind = kinds.get(field.annotation, "float")  # type: ignore[arg-type]
        bad, shown = ('"yes"', "'yes'") if kind == "bool" else ("[]", "[]")
        cases[f"{section}.{name}"] = (
            f"{section} = {{ {name} = {bad} }}",
            f"[tool.slam.{section}] {name} = {shown} must be a {kind}",
        )
    return cases


WRONG_TYPES |= _derived("gate", GateTable) | _derived("baseline", BaselineTable)

WRONG_VALUES: dict[str, tuple[str, str]] = {
    "unknown record mode": (
        'record = "sometimes"',
        "[tool.slam] record = 'sometimes' must be 'none', 'new' or 'all'",
    ),
    "negative samples": (
        "samples = -1",
        "[tool.slam] samples = -1 must be greater than or equal to 1",
    ),
    "zero repeat": ("repeat = 0", "[tool.slam] repeat = 0 must be greater than or equal to 1"),
    "negative audits": (
        "audit_per_feature = -1",
        "[tool.slam] audit_per_feature = -1 must be greater than or equal to 0",
    ),
    "pass_fraction 2": (
        "pass_fraction = 2",
        "[tool.slam] pass_fraction = 2 must be less than or equal to 1",
    ),
    "zero engine timeout": (
        "engine_timeout_s = 0",
        "[tool.slam] engine_timeout_s = 0 must be greater than 0",
    ),
    "negative scorer deadline": (
        "scorer_timeout_s = -1",
        "[tool.slam] scorer_timeout_s = -1 must be greater than or equal to 0",
    ),
    "negative model timeout": (
        M + "timeout_s = -1",
        "[tool.slam.models.m] timeout_s = -1 must be greater than 0",
    ),
    "unknown provider": (
        '[tool.slam.models.m]\nprovider = "tgi"',
        "[tool.slam.models.m] provider='tgi'; use one of",
    ),
    "gate percentage": (
        "gate = { min_pass_rate = 95 }",
        "[tool.slam.gate] min_pass_rate = 95 must be a fraction in 0..1",
    ),
    "at_least 2": (
        "equivalence = { at_least = 2 }",
        "[tool.slam.equivalence] at_least = 2 must be less than or equal to 1",
    ),
    "unknown scorer": (
        'equivalence = { by = "fuzy" }',
        "[tool.slam.equivalence] by = 'fuzy' is not a scorer; did you mean 'fuzzy'?",
    ),
    "negative price": (
        "prices = { gpt-4 = { input_per_mtok = -1 } }",
        "input_per_mtok must be a number of USD >= 0, got -1",
    ),
    "tool.slam not a table": ("", "[tool.slam] = 5 must be a table of settings"),
    "concurrency above the bound": (
        "concurrency = 513",
        "[tool.slam] concurrency = 513 must be less than or equal to 512",
    ),
    "a model's concurrency above the bound": (
        M + "concurrency = 100000",
        "[tool.slam.models.m] concurrency = 100000 must be less than or equal to 512",
    ),
    "negative alone_every": (
        "alone_every = -1",
        "[tool.slam] alone_every = -1 must be greater than or equal to 0",
    ),
}

UNKNOWN_KEYS: dict[str, tuple[str, str]] = {
    "top level": (
        'refernce = "openai:gpt-4"',
        "[tool.slam] has unknown keys ['refernce']; did you mean 'reference'?",
    ),
    "two typos": (
        "smaples = 2\nrecrod = 'new'",
        "did you mean 'recrod' -> 'record', 'smaples' -> 'samples'?",
    ),
    "model table": (
        '[tool.slam.models.m]\nbasurl = "http://x/v1"',
        "[tool.slam.models.m] has unknown keys ['basurl']; did you mean 'base_url'?",
    ),
    "gate": (
        "gate = { min_pass = 0.9 }",
        "[tool.slam.gate] has unknown keys ['min_pass']; did you mean 'min_pass_rate'?",
    ),
    "gate allow_undecided": (
        "gate = { allow_undecide = true }",
        "[tool.slam.gate] has unknown keys ['allow_undecide']; did you mean 'allow_undecided'?",
    ),
    "baseline": (
        "baseline = { latency_increase = 5 }",
        "[tool.slam.baseline] has unknown keys ['latency_increase']; did you mean",
    ),
    "scorer option": (
        'equivalence = { by = "fuzzy", methd = "ratio" }',
        "scorer 'fuzzy' has no option methd; did you mean 'method'?",
    ),
    "vllm engine option": (
        '[tool.slam.models.q]\nprovider = "vllm"\nengine = { max_model_length = 2048 }',
        "[tool.slam.models.q.engine] has unknown keys ['max_model_length']; did you mean 'max_model_len'?",
    ),
    "budget": (
        "budget = { p95_e2e = 100 }",
        "[tool.slam.budget]: unknown key 'p95_e2e'; keys are <stat>_<metric>",
    ),
}


def _project(pytester: pytest.Pytester, toml: str) -> None:
    text = "[tool]\nslam = 5\n" if not toml else "[tool.slam]\n" + toml + "\n"
    pytester.makefile(".toml", pyproject=text)
    pytester.makepyfile(test_x="import pytest\npytestmark = pytest.mark.slm\ndef test_x(): pass\n")


def _one_line(result: pytest.RunResult, fragment: str) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    lines = [line for line in out.splitlines() if "pytest-slam" in line or "tool.slam" in line]
    assert len(lines) == 1 and fragment in lines[0], out


@pytest.mark.parametrize(("toml", "fragment"), WRONG_TYPES.values(), ids=list(WRONG_TYPES))
def test_every_key_with_a_wrong_type_is_one_line(
    pytester: pytest.Pytester, toml: str, fragment: str
) -> None:
    _project(pytester, toml)
    _one_line(pytester.runpytest("-p", "no:cacheprovider"), fragment)


@pytest.mark.parametrize(("toml", "fragment"), WRONG_VALUES.values(), ids=list(WRONG_VALUES))
def test_wrong_values_are_one_line(pytester: pytest.Pytester, toml: str, fragment: str) -> None:
    _project(pytester, toml)
    _one_line(pytester.runpytest("-p", "no:cacheprovider"), fragment)


@pytest.mark.parametrize(("toml", "fragment"), UNKNOWN_KEYS.values(), ids=list(UNKNOWN_KEYS))
def test_unknown_keys_name_the_nearest_known_key(
    pytester: pytest.Pytester, toml: str, fragment: str
) -> None:
    _project(pytester, toml)
    _one_line(pytester.runpytest("-p", "no:cacheprovider"), fragment)


def test_the_cases_cover_every_key_of_every_section() -> None:
    sections = {
        "": SlamTable,
        "models.": ModelTable,
        "equivalence.": EquivalenceTable,
        "prices.": PriceTable,
        "gate.": GateTable,
        "baseline.": BaselineTable,
    }
    keys = {prefix + name for prefix, model in sections.items() for name in model.model_fields}
    keys |= {"prices." + name for name in PriceEntry.model_fields} | {"prices.MODEL", "budget.KEY"}
    assert keys == set(WRONG_TYPES)


def test_a_bad_value_in_the_table_stops_the_run_before_any_engine(
    pytester: pytest.Pytester,
) -> None:
    """The embedded model is selected, but nothing starts: the table is checked at configure."""
    _project(pytester, 'candidates = ["smollm2-135m"]\nsamples = 0')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    _one_line(result, "[tool.slam] samples = 0 must be greater than or equal to 1")
    assert "engine" not in result.stdout.str()


def test_command_line_values_are_checked_with_the_table(pytester: pytest.Pytester) -> None:
    """A valid option overrides a bad table value: the two are merged, then checked once."""
    _project(pytester, 'reference = "none"\nsamples = "three"')
    _one_line(pytester.runpytest("-p", "no:cacheprovider"), "samples = 'three'")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--slm-samples=2", "--slm-models=http://127.0.0.1:9/v1#ghost"
    )
    result.assert_outcomes(passed=1)  # the run started with samples = 2


@pytest.mark.parametrize("value", ["600", "many"])
def test_a_concurrency_option_above_the_bound_or_not_a_number_is_one_line(
    pytester: pytest.Pytester, value: str
) -> None:
    _project(pytester, 'reference = "none"')
    result = pytester.runpytest("-p", "no:cacheprovider", f"--slm-concurrency={value}")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if "--slm-concurrency" in line]
    assert len(lines) == 1 and repr(value) in lines[0], out
    assert ("at most 512" in lines[0]) == (value == "600"), out


def _toml(value: object) -> str:
    """A TOML value (the cases' values: strings, numbers, booleans, lists, tables)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _clash(before: object, value: object) -> bool:
    if before is None:
        return False
    if isinstance(before, dict) and isinstance(value, dict):
        return bool(set(before) & set(value))
    return True


def _all_at_once() -> tuple[str, list[str]]:
    """One table holding every case that can share it (each model case its own table, each
    price case its own model), and the fragment each case's line must contain."""
    table: dict[str, Any] = {}
    fragments = []
    cases = {**WRONG_TYPES, **WRONG_VALUES, **UNKNOWN_KEYS}
    for i, (name, (toml, fragment)) in enumerate(cases.items()):
        if name in ("models", "tool.slam not a table", "top level", "two typos"):
            continue  # `models = 5` leaves no room for tables; top-level typos share one line
        toml = toml.replace("models.m]", f"models.m{i}]").replace("gpt-4", f"gpt-4-{i}")
        case = tomllib.loads("[tool.slam]\n" + toml)["tool"]["slam"]
        if any(_clash(table.get(key), value) for key, value in case.items()):
            continue  # the same key as an earlier case
        for key, value in case.items():
            table[key] = {**table.get(key, {}), **value} if isinstance(value, dict) else value
        fragments.append(
            fragment.replace("models.m]", f"models.m{i}]").replace("gpt-4", f"gpt-4-{i}")
        )
    models = table.pop("models", {})
    text = "[tool.slam]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in table.items())
    for name, model in models.items():
        text += f"[tool.slam.models.{name}]\n" + "".join(
            f"{k} = {_toml(v)}\n" for k, v in model.items()
        )
    return text, fragments


def test_slam_config_check_names_every_case_in_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cases above together in one table: ``slam config check`` names each, one line each,
    in one run (a run of pytest stops on the first; a user fixing them would rerun for each)."""
    text, fragments = _all_at_once()
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    status = main(["config", "check"])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "") and "Traceback" not in err, err
    missing = [fragment for fragment in fragments if fragment not in err]
    assert not missing, err
    assert len(fragments) > 60
    assert err.splitlines()[-1].endswith("problems; fix them all, then check again")
