"""The [tool.slam] model: what a valid table becomes, and the schema and the docs' configuration
reference kept equal to it."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import tomllib
from pathlib import Path

import pytest

from pytest_slam.cli.config_docs import SCHEMA_PATH, readme_block, reference_markdown, schema_text
from pytest_slam.config import BaselineTable, GateTable, ModelTable, SlamTable, load
from pytest_slam.project import from_table
from pytest_slam.report.baseline import Tolerances
from pytest_slam.report.gate import Gate
from pytest_slam.settings import Settings, SettingsError
from pytest_slam.swap import models

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_PAGE = ROOT / "docs" / "reference" / "configuration.md"
# Pages whose first ```toml block is a whole [tool.slam] example a user copies
EXAMPLES = [ROOT / "README.md", ROOT / "docs" / "tutorial" / "your-product.md"]


def test_settings_defaults_are_the_models_defaults() -> None:
    assert Settings() == SlamTable().to_settings(configured=False)
    assert from_table(None) == Settings()


def test_the_table_has_one_key_per_settings_field_in_its_order() -> None:
    renamed = {"models": "candidates", "model_table": "models"}  # TOML's names for two fields
    fields = [renamed.get(f.name, f.name) for f in dataclasses.fields(Settings)]
    run_only = ["configured", "golden_dir_legacy"]  # found by the run, never written
    assert list(SlamTable.model_fields) == [f for f in fields if f not in run_only]


def test_sections_have_the_fields_their_readers_take() -> None:
    assert set(GateTable.model_fields) == {f.name for f in dataclasses.fields(Gate)}
    assert set(BaselineTable.model_fields) == {f.name for f in dataclasses.fields(Tolerances)}
    assert set(ModelTable.model_fields) == models._TABLE_KEYS
    assert load({"gate": {"min_pass_rate": 0.5, "no_regression": True}}).gate == {
        "min_pass_rate": 0.5,
        "no_regression": True,
    }  # only the keys given: an absent rule is off


def test_the_scorer_deadline_is_read_and_zero_turns_it_off() -> None:
    assert load({}).scorer_timeout_s == 60.0
    assert load({"scorer_timeout_s": 2.5}).scorer_timeout_s == 2.5
    assert load({"scorer_timeout_s": 0}).scorer_timeout_s == 0


def test_a_full_table_becomes_plain_settings() -> None:
    table = {
        "candidates": "smollm2-135m, qwen",
        "models": {"qwen": {"base_url": "http://x/v1", "timeout_s": 30, "engine": {"gpu": True}}},
        "equivalence": {"by": "json", "ignore": ["$.id"], "at_least": 1},
        "prices": {"as_of": datetime.date(2026, 1, 1), "gpt-4": {"input_per_mtok": 25}},
        "budget": {"p95_e2e_ms": 2000},
        "gate": {"min_pass_rate": 0.9},
        "repeat": 3,
    }
    settings = load(table)
    assert settings.models == ["smollm2-135m", "qwen"]
    assert settings.model_table == {
        "qwen": {"base_url": "http://x/v1", "timeout_s": 30.0, "engine": {"gpu": True}}
    }
    assert settings.equivalence == {"by": "json", "ignore": ["$.id"], "at_least": 1.0}
    assert settings.prices == {"as_of": "2026-01-01", "gpt-4": {"input_per_mtok": 25.0}}
    assert (settings.gate, settings.baseline, settings.repeat) == ({"min_pass_rate": 0.9}, {}, 3)
    assert json.loads(json.dumps(settings.as_dict()))["budget"] == {"p95_e2e_ms": 2000.0}


def test_models_may_list_the_candidates_when_no_model_table_exists() -> None:
    assert load({"models": ["a", "b"]}).models == ["a", "b"]
    assert load({"models": "a,b", "candidates": ["c"]}).models == ["c"]


def test_command_line_overrides_replace_table_values_before_the_check() -> None:
    settings = load({"samples": "three", "candidates": ["a"]}, {"samples": 2, "candidates": ["b"]})
    assert (settings.samples, settings.models, settings.configured) == (2, ["b"], True)
    assert load(None, {"record": "all"}).configured is False
    with pytest.raises(SettingsError, match=r"record = 'sometimes' must be 'none', 'new'"):
        load(None, {"record": "sometimes"})


def test_several_problems_are_one_line_each() -> None:
    with pytest.raises(SettingsError) as info:
        load({"samples": 0, "repeat": "x", "smaple": 1})
    lines = str(info.value).splitlines()
    assert len(lines) == 3 and lines[0].startswith("[tool.slam] has unknown keys ['smaple']")


def test_model_timeout_reaches_the_spec() -> None:
    spec = models.resolve(
        "m", load({"models": {"m": {"base_url": "http://x/v1", "timeout_s": 9}}}).model_table
    )
    assert spec.timeout_s == 9.0
    assert models.resolve("openai:gpt-4").timeout_s is None


def test_checked_in_schema_is_the_generated_one() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "run `slam config schema > pytest_slam/slam.schema.json`"
    )


def test_the_docs_reference_is_the_generated_one() -> None:
    assert readme_block(REFERENCE_PAGE.read_text(encoding="utf-8")) == reference_markdown(), (
        "run `python docs/generate.py` (it pastes `slam config reference` into "
        "docs/reference/configuration.md)"
    )


@pytest.mark.parametrize("page", EXAMPLES, ids=lambda page: page.name)
def test_schema_accepts_the_documented_example_and_rejects_a_typo(page: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    readme = page.read_text(encoding="utf-8")
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    table = tomllib.loads("\n".join(line.strip() for line in example.splitlines()))["tool"]["slam"]
    validator = jsonschema.Draft202012Validator(json.loads(schema_text()))
    assert list(validator.iter_errors(table)) == []
    load(table)  # and the model agrees
    assert list(validator.iter_errors({**table, "smaples": 2}))


def test_slam_config_commands(pytester: pytest.Pytester) -> None:
    """The real console script: schema and reference print, check names the bad key."""
    slam = [sys.executable, "-m", "pytest_slam.cli", "config"]
    result = pytester.run(*slam, "schema")
    assert result.ret == 0 and json.loads(result.stdout.str()) == json.loads(schema_text())
    assert pytester.run(*slam, "reference").stdout.str().strip() == reference_markdown().strip()
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    result = pytester.run(*slam, "check")
    assert result.ret == 0 and "is valid" in result.stdout.str()
    pytester.makefile(".toml", pyproject="[tool.slam]\nsamples = 'three'\n")
    result = pytester.run(*slam, "check")
    assert result.ret == 2
    assert result.stderr.lines == [
        "slam config check: [tool.slam] samples = 'three' must be a whole number."
    ]
