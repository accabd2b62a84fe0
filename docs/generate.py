"""The docs' reference blocks, generated from the code: ``python docs/generate.py`` rewrites them.

Each block sits between ``<!-- generated:NAME:start ... -->`` and ``<!-- generated:NAME:end -->`` in
a page under docs/reference/, so the page's own words around it stay hand-written; the report schema
page is SCHEMA.md whole. ``tests/test_docs.py`` fails while a committed block differs from what the
code gives now. Everything is read from the parts users meet: the ``--slm-*`` options and ini keys
as the plugin registers them, the markers, the hookspecs, the ``slam`` parser, the exit statuses,
``slam config reference`` and ``pytest_slam/report/SCHEMA.md``.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
COMMAND = "python docs/generate.py"


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped, argparse's %% as %."""
    return " ".join(str(text).replace("%%", "%").split()).replace("|", "\\|")


# -- pytest options, ini keys and markers, as plugin.py registers them ----------------------------


@dataclass
class _Registered:
    """What ``pytest_addoption`` registers, read through the two calls it makes on pytest's parser
    (``getgroup(...).addoption`` and ``addini``)."""

    options: list[tuple[tuple[str, ...], dict[str, Any]]] = field(default_factory=list)
    ini: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def getgroup(self, name: str, description: str = "") -> _Registered:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.options.append((names, attrs))

    def addini(self, name: str, help: str, **attrs: Any) -> None:
        self.ini.append((name, {"help": help, **attrs}))


def registered() -> _Registered:
    from pytest_slam import plugin

    found = _Registered()
    plugin.pytest_addoption(found)  # type: ignore[arg-type]
    return found


def options_block() -> str:
    rows = ["| option | value | meaning |", "| --- | --- | --- |"]
    for names, attrs in registered().options:
        value = "" if attrs.get("action") == "store_true" else f"`{attrs.get('metavar', 'VALUE')}`"
        rows.append(f"| `{'`, `'.join(names)}` | {_cell(value)} | {_cell(attrs.get('help', ''))} |")
    return "\n".join(rows) + "\n"


def ini_block() -> str:
    rows = ["| ini key | type | meaning |", "| --- | --- | --- |"]
    for name, attrs in registered().ini:
        kind = attrs.get("type") or "string"
        rows.append(f"| `{name}` | {kind} | {_cell(attrs['help'])} |")
    return "\n".join(rows) + "\n"


def markers_block() -> str:
    from pytest_slam.plugin import MARKERS

    out = []
    for line in MARKERS:
        name, _, meaning = line.partition(": ")
        out.append(f"- `{name}`: {' '.join(meaning.split())}")
    return "\n".join(out) + "\n"


# -- hooks ----------------------------------------------------------------------------------------


def hooks_block() -> str:
    from pytest_slam.run.inputs import hookspecs

    out: list[str] = []
    specs = [
        f for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("pytest_")
    ]
    for func in sorted(specs, key=lambda f: f.__code__.co_firstlineno):  # as declared
        name = func.__name__
        params = ", ".join(inspect.signature(func).parameters)
        doc = " ".join((inspect.getdoc(func) or "").split())
        out += [f"### `{name}({params})`", "", doc, ""]
    return "\n".join(out)


# -- the slam command -----------------------------------------------------------------------------


def _parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every ``slam`` command, depth first: its path, its parser and its one-line help."""
    from pytest_slam.cli import build_parser
    from pytest_slam.settings import Settings

    found: list[tuple[tuple[str, ...], argparse.ArgumentParser, str]] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...], text: str) -> None:
        found.append((path, parser, text))
        for action in parser._actions:  # argparse has no public list of a parser's arguments
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help or "" for c in action._choices_actions}
                for name, sub in action.choices.items():
                    walk(sub, (*path, name), helps.get(name, ""))

    top = build_parser(Settings())
    walk(top, (), top.description or "")
    return found


def _argument(action: argparse.Action) -> tuple[str, str]:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        takes = action.nargs != 0
        metavar = action.metavar or (action.dest.upper() if takes else None)
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        return (f"`{names} {metavar}`" if metavar else f"`{names}`"), _help(action)
    name = action.metavar if isinstance(action.metavar, str) else action.dest
    if action.nargs in ("*", "+", argparse.REMAINDER):
        name += " ..."
    elif action.nargs == "?":
        name = f"[{name}]"
    return f"`{name}`", _help(action)


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": "slam"}
    return text


def cli_block() -> str:
    out: list[str] = []
    for path, parser, text in _parsers():
        out += [f"### `{' '.join(['slam', *path])}`", "", " ".join(text.split()), ""]
        rows = []
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    anchor = "-".join(["slam", *path, choice.dest])
                    rows.append((f"[`{choice.dest}`](#{anchor})", choice.help or ""))
                continue
            rows.append(_argument(action))
        if rows:
            out += ["| argument | meaning |", "| --- | --- |"]
            out += [f"| {_cell(name)} | {_cell(meaning)} |" for name, meaning in rows]
            out.append("")
    return "\n".join(out)


def exits_block() -> str:
    from pytest_slam.cli import exits

    return exits.table_markdown()


# -- the pages ------------------------------------------------------------------------------------

BLOCKS: dict[str, tuple[Path, Callable[[], str]]] = {
    "options": (REFERENCE / "options.md", options_block),
    "ini": (REFERENCE / "options.md", ini_block),
    "markers": (REFERENCE / "options.md", markers_block),
    "hooks": (REFERENCE / "hooks.md", hooks_block),
    "cli": (REFERENCE / "cli.md", cli_block),
    "exits": (REFERENCE / "cli.md", exits_block),
}
CONFIG_PAGE = REFERENCE / "configuration.md"  # holds `slam config reference` between its markers
SCHEMA_SOURCE = ROOT / "pytest_slam" / "report" / "SCHEMA.md"
SCHEMA_PAGE = REFERENCE / "report-schema.md"


def start(name: str) -> str:
    return f"<!-- generated:{name}:start ({COMMAND}) -->"


def end(name: str) -> str:
    return f"<!-- generated:{name}:end -->"


def block(page: str, name: str) -> str | None:
    """The block as the page holds it now (None: the page has no such block)."""
    found = re.search(re.escape(start(name)) + r"\n(.*?)" + re.escape(end(name)), page, re.S)
    return None if found is None else found.group(1)


def schema_page() -> str:
    return (
        f"<!-- generated: a copy of pytest_slam/report/SCHEMA.md ({COMMAND}) -->\n\n"
        + SCHEMA_SOURCE.read_text(encoding="utf-8")
    )


def expected() -> dict[Path, str]:
    """Every generated page as the code gives it now."""
    from pytest_slam.cli.config_docs import README_END, README_START, reference_markdown

    pages: dict[Path, str] = {}
    for name, (path, make) in BLOCKS.items():
        page = pages.get(path) or path.read_text(encoding="utf-8")
        if block(page, name) is None:
            raise SystemExit(f"{path}: no block {name}; add {start(name)} and {end(name)}")
        pattern = re.escape(start(name)) + r"\n.*?" + re.escape(end(name))
        fresh = f"{start(name)}\n{make()}{end(name)}"
        pages[path] = re.sub(pattern, lambda _, text=fresh: text, page, flags=re.S)
    config = CONFIG_PAGE.read_text(encoding="utf-8")
    pattern = re.escape(README_START) + r".*?" + re.escape(README_END) + r"\n"
    pages[CONFIG_PAGE] = re.sub(pattern, lambda _: reference_markdown(), config, flags=re.S)
    pages[SCHEMA_PAGE] = schema_page()
    return pages


def main() -> int:
    for path, text in expected().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
