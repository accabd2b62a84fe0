"""Tutorial 2 (docs/tutorial/your-product.md) works as written and shows what it prints (issue
52): its steps (``slam config check``, ``pytest --slm-record=new``, ``pytest``) run as real
processes in a scratch product, with the suite's loopback fakes for GPT-4 and the candidate, and
end at ``gate: PASS``, exit 0; every output block on the page is what that run prints now
(timings, ports and folders aside), so the page cannot go stale: ``python docs/tutorial_run.py``
rewrites it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tutorial() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_tutorial", ROOT / "docs" / "tutorial_run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


TUTORIAL = _tutorial()


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    done = TUTORIAL.run(tmp_path_factory.mktemp("tutorial") / "product")
    return {step.name: step for step in done}


def test_tutorial_2_ends_at_a_green_gate(steps: dict[str, Any]) -> None:
    check, record, replay = steps["check"], steps["record"], steps["replay"]
    assert check.status == 0 and "is valid, and a run has what it needs" in check.output
    assert record.status == 0, record.output
    assert "recorded the reference (gpt-4) only" in record.output  # no candidate asked
    assert replay.status == 0, replay.output
    assert "gate: PASS" in replay.output.splitlines()
    assert replay.output.rstrip().endswith("pytest-slam gate: PASS")


def test_every_output_block_is_what_a_run_prints_now(steps: dict[str, Any]) -> None:
    page = TUTORIAL.PAGE.read_text()
    shown = TUTORIAL.blocks(page)
    assert set(shown) == {"product", "tests", "pyproject", "check", "record", "replay"}
    now = TUTORIAL.blocks(TUTORIAL.rewritten(page, list(steps.values())))
    stale = [
        name for name in shown if TUTORIAL.normalized(shown[name]) != TUTORIAL.normalized(now[name])
    ]
    assert not stale, f"{stale} stale in {TUTORIAL.PAGE.name}: run `{TUTORIAL.COMMAND}`"


def test_the_page_configures_what_the_run_ran() -> None:
    """The TOML the page shows is the one the run used, but for its reference line."""
    assert TUTORIAL.REFERENCE in TUTORIAL.PYPROJECT
    assert "slam config check" in TUTORIAL.PAGE.read_text().split("<!-- output:record -->")[0]
