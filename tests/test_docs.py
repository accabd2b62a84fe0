"""The docs site (docs/, mkdocs.yml): its reference pages are what the code gives now, they name every
option, ini key and ``[tool.slam]`` key, and the README stays a short door into them.

The generated blocks are rewritten by ``python docs/generate.py``; the options and ini keys checked
here are read from a real ``pytest --help``, not from the generator, so an option the generator
missed fails too.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from pytest_slam.cli.config_docs import SECTIONS, readme_block

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
README = ROOT / "README.md"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def reference_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(REFERENCE.glob("*.md")))


@pytest.mark.parametrize("page", sorted(generator().expected()), ids=lambda p: p.name)
def test_each_generated_page_is_what_the_code_gives_now(page: Path) -> None:
    assert page.read_text(encoding="utf-8") == generator().expected()[page], (
        f"{page.relative_to(ROOT)} is stale: run `python docs/generate.py`"
    )


def test_every_generated_block_is_in_its_page() -> None:
    gen = generator()
    for name, (path, _make) in gen.BLOCKS.items():
        assert gen.block(path.read_text(encoding="utf-8"), name) is not None, (name, path)


def test_every_option_and_ini_key_pytest_lists_is_in_the_reference(
    pytester: pytest.Pytester,
) -> None:
    """Read from the real ``pytest --help``: the plugin as pytest loads it."""
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    text = result.stdout.str()
    options = set(re.findall(r"(--slm-[a-z-]+)", text))
    ini = set(re.findall(r"^  (slm_\w+) ", text, re.MULTILINE))
    assert len(options) >= 15 and {"slm_paths", "slm_heartbeat"} <= ini, text
    reference = reference_text()
    missing = sorted(name for name in options | ini if f"`{name}`" not in reference)
    assert not missing, f"not in docs/reference/: {missing}; run `python docs/generate.py`"


def _keys(model: type[BaseModel], prefix: str) -> list[tuple[str, str]]:
    return [(prefix, name) for name in model.model_fields]


def test_every_tool_slam_key_is_in_the_reference() -> None:
    """Every key of every ``[tool.slam...]`` table, from the pydantic model its schema is built from,
    in a row of that table's section of docs/reference/configuration.md."""
    block = readme_block((REFERENCE / "configuration.md").read_text(encoding="utf-8"))
    sections = dict(re.findall(r"^`(\[tool\.slam[^`]*)`.*\n\n((?:\|.*\n)+)", block, re.MULTILINE))
    assert list(sections) == [title for title, _model, _note in SECTIONS]
    missing = []
    for title, model, _note in SECTIONS:
        section = sections[title]
        missing += [(t, k) for t, k in _keys(model, title) if f"| `{k}` |" not in section]
    assert missing == []


def test_every_slam_command_and_hook_is_in_the_reference() -> None:
    from pytest_slam.run.inputs import hookspecs

    reference = reference_text()
    hooks = [name for name in vars(hookspecs) if name.startswith("pytest_slam_")]
    assert len(hooks) >= 4
    assert [h for h in hooks if f"`{h}(" not in reference] == []
    gen = generator()
    paths = [" ".join(["slam", *path]) for path, _parser, _text in gen._parsers()]
    assert [p for p in paths if f"### `{p}`" not in reference] == []


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "the README is a door: move the detail into docs/"
    links = re.findall(r"\]\(((?:docs|bench)/[^)#]+)", text)
    assert links and [link for link in links if not (ROOT / link).exists()] == []


def test_the_bench_readme_keeps_the_current_figures_and_links_every_history_file() -> None:
    """bench/README.md holds each bench's latest table and command; the dated runs live in
    bench/history/, each file reachable from the README (issue 45: at most 400 lines)."""
    bench = ROOT / "bench"
    text = (bench / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400, "move the dated runs into bench/history/"
    links = set(re.findall(r"\]\((history/[^)#]+)\)", text))
    assert [link for link in sorted(links) if not (bench / link).is_file()] == []
    history = {f"history/{path.name}" for path in (bench / "history").glob("*.md")}
    assert sorted(history - links) == []


def test_the_readme_and_contributing_give_the_same_two_set_up_commands() -> None:
    readme = README.read_text(encoding="utf-8")
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv")]
    assert len(commands) == 2
    assert all(command in contributing.splitlines() for command in commands)
