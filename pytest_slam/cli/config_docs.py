"""What the ``[tool.slam]`` model tells people: its JSON Schema (for editors) and the README table.

Both are generated from config.SlamTable, and the checked-in copies (``slam.schema.json``, the
README's configuration reference) are compared with them by tests, so they never drift.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pytest_slam.config import (
    BaselineTable,
    EquivalenceTable,
    GateTable,
    ModelTable,
    PriceEntry,
    SlamTable,
)

SCHEMA_PATH = Path(__file__).parents[1] / "slam.schema.json"  # shipped at the package root
SCHEMA_ID = "https://json-schema.org/draft/2020-12/schema"
README_START = "<!-- slam-config-reference:start (generated: slam config reference) -->"
README_END = "<!-- slam-config-reference:end -->"
SECTIONS: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("[tool.slam]", SlamTable, ""),
    ("[tool.slam.models.NAME]", ModelTable, "a model run by the name NAME"),
    ("[tool.slam.equivalence]", EquivalenceTable, "other keys: the scorer's options"),
    ("[tool.slam.prices.MODEL]", PriceEntry, "a new model needs both; `as_of`, `source` re-date"),
    ("[tool.slam.gate]", GateTable, "each rule is off unless set"),
    ("[tool.slam.baseline]", BaselineTable, "tolerances of the comparison with --slm-baseline"),
)


def schema() -> dict[str, Any]:
    """The JSON Schema of ``[tool.slam]``; TOML has no null, so optional keys are just absent."""
    return {"$schema": SCHEMA_ID, **_drop_null(SlamTable.model_json_schema())}


def schema_text() -> str:
    return json.dumps(schema(), indent=2) + "\n"


def _drop_null(node: Any) -> Any:
    if isinstance(node, list):
        return [_drop_null(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: _drop_null(v) for k, v in node.items() if not (k == "default" and v is None)}
    options = [o for o in node.get("anyOf", []) if o != {"type": "null"}]
    if "anyOf" in node and len(options) == 1:
        node.pop("anyOf")
        node.update(options[0])
    elif "anyOf" in node:
        node["anyOf"] = options
    return node


# -- the README's reference table ----------------------------------------------------------------


def reference_markdown() -> str:
    """One table per section: key, type, default, meaning."""
    out = [README_START]
    for title, model, note in SECTIONS:
        props = _drop_null(model.model_json_schema())["properties"]
        out += ["", f"`{title}`" + (f": {note}" if note else ""), ""]
        out += ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            default = field.get_default(call_default_factory=True)
            meaning = field.description or ""
            out.append(f"| `{name}` | {_type(props[name])} | {_default(default)} | {meaning} |")
    return "\n".join([*out, "", README_END]) + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        return " or ".join(_type(option) for option in prop["anyOf"])
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    if "$ref" in prop or prop.get("type") == "object":
        return "table"
    if prop.get("type") == "array":
        return "list of strings"
    text = {"integer": "integer", "number": "number", "boolean": "boolean"}.get(
        str(prop.get("type"))
    )
    return (text or "string") + _bounds(prop)


def _bounds(prop: dict[str, Any]) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        return f" {low}..{high}"
    if low is not None:
        return f" >= {low}"
    return f" > {prop['exclusiveMinimum']}" if "exclusiveMinimum" in prop else ""


def _default(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{json.dumps(value)}`"


def readme_block(readme: str) -> str:
    """The generated section as the README holds it now ('' when it has none)."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < 0:
        return ""
    return readme[start : end + len(README_END)] + "\n"


# -- `slam config ...` ----------------------------------------------------------------------------


def add_commands(config: argparse.ArgumentParser) -> None:
    """``slam config schema | reference | check``."""
    sub = config.add_subparsers(dest="config_command", required=True)
    for name, text in (
        ("schema", "Print the JSON Schema of [tool.slam] (for editors)"),
        ("reference", "Print the configuration reference (markdown)"),
        ("check", "Validate [tool.slam] in ./pyproject.toml: every key, type and rule at once"),
    ):
        sub.add_parser(name, help=text, description=text)
    for name, func in (("schema", _cmd_schema), ("reference", _cmd_reference)):
        sub.choices[name].set_defaults(func=func)
    sub.choices["check"].set_defaults(func=cmd_check)


def _cmd_schema(args: argparse.Namespace) -> int:
    print(schema_text(), end="")
    return 0


def _cmd_reference(args: argparse.Namespace) -> int:
    print(reference_markdown(), end="")
    return 0


def cmd_check(args: argparse.Namespace | None = None) -> int:
    """Every problem in one run, each one line on stderr, exit 2: the table's own (each key,
    section key and model table apart), then what a run of the rest would need (config_check.py)."""
    from pytest_slam.cli import exits
    from pytest_slam.cli.config_check import models_of, not_checked, problems, table_problems
    from pytest_slam.project import read_table
    from pytest_slam.settings import SettingsError

    try:
        table: object = read_table(Path.cwd() / "pyproject.toml")
    except SettingsError as exc:  # pytest could not read the file either: that one line
        return exits.refuse("config check", exc)
    if table is None:
        print("slam: ./pyproject.toml has no [tool.slam] table; pytest-slam runs on --slm-models.")
        return exits.OK
    if not isinstance(table, Mapping):
        return exits.refuse("config check", f"[tool.slam] = {table!r} must be a table of settings.")
    checked = table_problems(table)
    found = [*checked.lines]
    skipped = "no model resolved until the lines above are fixed"
    if checked.settings is not None:
        found += problems(checked.settings, checked)
        skipped = not_checked(checked) or ""
    found = list(dict.fromkeys(found))
    for line in [*found, *([skipped] if found and skipped else [])]:
        exits.refuse("config check", line)
    if len(found) > 1:
        exits.refuse("config check", f"{len(found)} problems; fix them all, then check again")
    if found:
        return exits.BAD_INPUT
    assert checked.settings is not None
    names = ", ".join(models_of(checked.settings))
    print(f"slam: [tool.slam] in ./pyproject.toml is valid, and a run has what it needs ({names}).")
    return exits.OK
