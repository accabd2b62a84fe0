"""Scorers by name: get_scorer, option checking, and a cheap package import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_slam.compare import SCORERS, Scorer, get_scorer
from pytest_slam.compare.named import scorer_class
from pytest_slam.compare.text import FuzzyScorer


def test_every_registered_scorer_is_a_scorer_with_its_name() -> None:
    """Read from the registry (``SCORERS``), so a new built-in is checked here without an edit;
    the scorers the docs and the cascade name by hand must be among them."""
    assert {"exact", "normalized", "json", "json_schema", "tool_calls", "label", "fuzzy", "length",
            "semantic", "judge"} <= set(SCORERS)  # fmt: skip
    for name in SCORERS:
        cls = scorer_class(name)
        assert issubclass(cls, Scorer)
        assert cls.name == name


def test_get_scorer_builds_with_options() -> None:
    scorer = get_scorer("fuzzy", method="ratio")
    assert isinstance(scorer, FuzzyScorer) and scorer.method == "ratio"
    assert get_scorer(" JSON ", ignore=["$.id"]).score('{"id": 1}', '{"id": 2}').value == 1.0
    assert get_scorer("label", choices=["yes", "no"]).score("Yes.", "yes").value == 1.0


def test_get_scorer_passes_an_instance_through() -> None:
    scorer = FuzzyScorer()
    assert get_scorer(scorer) is scorer
    with pytest.raises(ValueError, match="options \\['method'\\] were given with a ready"):
        get_scorer(scorer, method="ratio")


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown scorer 'bleu'; known scorers: exact, normalized"):
        get_scorer("bleu")


def test_unknown_and_missing_options_are_named() -> None:
    with pytest.raises(ValueError, match="'fuzzy' has no option threshold; it takes: method"):
        get_scorer("fuzzy", threshold=0.5)
    with pytest.raises(ValueError, match="scorer 'label' needs option choices"):
        get_scorer("label")
    with pytest.raises(ValueError, match="scorer 'exact' has no option x; it takes: no options"):
        get_scorer("exact", x=1)


def test_importing_compare_imports_no_heavy_module() -> None:
    code = (
        "import sys, pytest_slam.compare\n"
        "heavy = {'openai', 'rapidfuzz', 'jsonschema', 'torch', 'sentence_transformers', 'numpy'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_submodule_shadows_a_name_the_package_exports() -> None:
    """Importing ``pytest_slam.compare.X`` sets the package's attribute X to the module, so a
    submodule named like an exported function would replace that function for everyone after."""
    import pkgutil

    import pytest_slam.compare as compare

    submodules = {m.name for m in pkgutil.iter_modules(compare.__path__)}
    assert not submodules & set(compare.__all__)
