"""The JSON report's document as types, and its JSON Schema generated from them.

``ReportDocument`` is what ``write_json`` writes, field for field and in order; the checked-in
``report.schema.json`` is generated from it with pydantic, so the schema cannot drift from the code
(tests/report/test_report_schema.py compares them). SCHEMA.md says what each field means.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam import records
from pytest_slam.records import JSON, Outcome, Record, local_names
from pytest_slam.report.aggregate import ModelRow, PerTestRow, RunInfo
from pytest_slam.report.gate_result import GateResult
from pytest_slam.report.visits import Visits

SCHEMA_PATH = Path(__file__).parent / "report.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass
class ReportDocument(Record):
    """One JSON report (schema ``pytest-slam/report/3``); ``schema`` first, to check at a glance.

    Derived keys that ``as_dict`` adds (a call's ``tpot_ms``, ``tokens_per_s`` and ``cut_by_cap``,
    a score's ``passed``) are described too (``DERIVED``): version 1 wrote them; version 2 leaves
    them out, with every field of an outcome and a per-test row at its default, and readers make
    them again; version 3 the visits' ``selected`` too when it is ``collected``.
    """

    schema: str
    generated_at: str
    run: RunInfo
    models: list[ModelRow] = field(default_factory=list)
    reference: ModelRow | None = None
    tests: list[PerTestRow] = field(default_factory=list)
    gate: GateResult | None = None  # once a gate was applied
    notes: list[str] = field(default_factory=list)
    visits: Visits | None = None  # what the run saw, for merging shards and stale entries
    outcomes: list[Outcome] = field(default_factory=list)
    digest: str | None = None  # SHA-256 of the visits and outcome lines (seal.py); None: not yet
    signature: str | None = None  # HMAC-SHA256 of the digest under the shard key (seal.py)


_NUMBER_OR_NULL = {"anyOf": [{"type": "number"}, {"type": "null"}]}
# Keys ``as_dict`` derives from a record's properties: described (by record name), as version 1
# wrote them.
DERIVED: dict[str, dict[str, JSON]] = {
    "Call": {
        "tpot_ms": {**_NUMBER_OR_NULL, "title": "Tpot Ms"},
        "tokens_per_s": {**_NUMBER_OR_NULL, "title": "Tokens Per S"},
        "cut_by_cap": {"type": "boolean", "title": "Cut By Cap"},
    },
    "Score": {"passed": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "title": "Passed"}},
    "Comparison": {"text": {"type": "string", "title": "Text"}},  # Comparison.describe()
}


def schema() -> dict[str, JSON]:
    """The JSON Schema of a report document, generated from ``ReportDocument``."""
    from pydantic import TypeAdapter  # a core dependency; only this command needs it

    generated: dict[str, JSON] = TypeAdapter(ReportDocument).json_schema()
    for name, keys in DERIVED.items():
        generated["$defs"][name]["properties"].update(keys)
    for name, definition in generated["$defs"].items():  # kept in the process, never written
        kind = getattr(records, name, None)
        for key in local_names(kind) if dataclasses.is_dataclass(kind) else ():
            definition["properties"].pop(key)
    return {"$schema": DIALECT, **generated}


def schema_text() -> str:
    """The schema as the checked-in file holds it (``report.schema.json``)."""
    return json.dumps(schema(), indent=2) + "\n"
