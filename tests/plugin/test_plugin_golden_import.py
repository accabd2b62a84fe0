"""Real GPT-4 answers (AlpacaEval, in ../shared/data) imported with ``slam golden import``, shown by
``slam golden stats``, then replayed to a real pytest run that has no key and no network.

The data is read in place; the test converts a few records to the documented ``simple`` import
format (importers.py) in a file of its own, as a team would convert its logged traffic.
"""

from __future__ import annotations

import json
from pathlib import Path

from plugin_golden_helpers import PRODUCT, by_test, run, slam

MODULE = "tests/test_alpaca.py"
ALPACA_TESTS = """
import json, pathlib
import pytest, product

CASES = json.loads((pathlib.Path(__file__).parent / "cases.json").read_text(encoding="utf-8"))

@pytest.mark.parametrize("idx", sorted(CASES))
def test_instruction(idx, slm_model, gpt4_reference):
    instruction, gpt4_output = CASES[idx]
    assert product.ask(instruction)  # the candidate, through the product's own client
    assert gpt4_reference.chat(instruction).text == gpt4_output
"""


def alpaca_records(shared_data: Path, count: int) -> list[dict]:
    path = shared_data / "alpaca_eval_gpt4_vs_slm" / "records.jsonl"
    with path.open(encoding="utf-8") as handle:
        return [json.loads(next(handle)) for _ in range(count)]


def test_real_gpt4_answers_import_show_in_stats_and_replay(pytester, shared_data, mini):
    records = alpaca_records(shared_data, 3)
    log = pytester.path / "gpt4_answers.jsonl"
    log.write_text("".join(json.dumps({
        "prompt": r["instruction"], "answer": r["gpt4_output"], "model": "gpt-4",
        "response_model": "gpt-4", "params": {"temperature": 0},
    }) + "\n" for r in records), encoding="utf-8")  # fmt: skip
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
reference = "openai:gpt-4"
candidates = ["mini"]

[tool.slam.models.mini]
base_url = "{mini.base_url}"
model = "gpt-4o-mini"
""")  # fmt: skip

    imported = slam(pytester, "golden", "import", str(log), "--module", MODULE)
    assert imported.returncode == 0, imported.stderr
    golden = Path("__slam__/openai-gpt-4/tests/test_alpaca.json")
    assert imported.stdout.startswith("imported 3, skipped 0 duplicates, 0 failed calls -> ")
    assert imported.stdout.rstrip().endswith(str(golden))
    again = slam(pytester, "golden", "import", str(log), "--module", MODULE)
    assert again.stdout.startswith("imported 0, skipped 3 duplicates")  # an import never replaces

    stats = slam(pytester, "golden", "stats")
    assert stats.returncode == 0, stats.stderr
    row = next(line for line in stats.stdout.splitlines() if line.startswith("openai-gpt-4/"))
    assert row.split()[:5] == [
        "openai-gpt-4/tests/test_alpaca.json",
        "openai:gpt-4",
        "3",
        "3",
        "gpt-4",
    ]
    rows = json.loads(slam(pytester, "golden", "stats", "--json").stdout)
    assert [(r["file"], r["entries"]) for r in rows] == [("openai-gpt-4/tests/test_alpaca.json", 3)]

    cases = {f"alpaca-{r['idx']}": [r["instruction"], r["gpt4_output"]] for r in records}
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    pytester.makepyfile(product=PRODUCT)
    (pytester.path / MODULE).write_text(ALPACA_TESTS, encoding="utf-8")
    before = (pytester.path / golden).read_bytes()
    run(pytester, "--slm-report=r.json").assert_outcomes(passed=3)  # no key: replayed only
    used = sorted(
        text for _, pairs in by_test(pytester.path / "r.json").values() for _, text in pairs
    )
    assert used == sorted(r["gpt4_output"] for r in records)
    assert (pytester.path / golden).read_bytes() == before
