"""``slam --help`` is part of the interface: every command, subcommand and option has a help line,
in plain text (no RST markup), as the real command prints it.

The commands are found by walking the parser ``slam`` builds, so a command or option added later
without help fails here; each one's help is then read from a real ``slam ... --help`` process.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from slam_helpers import SLAM

from pytest_slam.cli import build_parser
from pytest_slam.settings import Settings

# RST markup: backticks (``literal``, `role`), literal blocks, bold, directives
RST = re.compile(r"`|::|\*\*|\.\. ")


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path below ``parser``, the parser's own first: (), ("golden",), ..."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(commands(sub, (*path, name)))
    return found


def parser_at(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser(Settings())
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def helped(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    """Each option, positional and subcommand of one parser, with its help (None: none given)."""
    out: list[tuple[str, str | None]] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            out.extend((c.dest, c.help) for c in action._choices_actions)
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        out.append((name, action.help))
    return out


ALL = commands(build_parser(Settings()))
PASS_THROUGH: set[tuple[str, ...]] = set()  # refresh passes its arguments to pytest, not --help


def test_every_command_is_listed() -> None:
    assert set(ALL) >= {
        (), ("golden",), ("golden", "refresh"), ("golden", "import"), ("golden", "stats"),
        ("golden", "prune"), ("golden", "restore"), ("golden", "promote"),
        ("golden", "unpromote"), ("golden", "merge"), ("golden", "merge-driver"),
        ("report",), ("report", "render"), ("report", "diff"),
        ("report", "schema"), ("config",), ("config", "schema"), ("config", "reference"),
        ("config", "check"), ("calibrate",), ("review",), ("rescore",), ("help",),
        ("cache",), ("cache", "clear"),
    }  # fmt: skip


def test_top_level_help_names_every_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per command
    result = pytester.run(*SLAM, "--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["usage: slam *", "pytest-slam's command line: golden answers*"])
    result.stdout.fnmatch_lines([
        "    golden * Golden answers of the reference model: refresh, import, stats, prune, "
        "restore, promote, unpromote, merge, merge-driver",
        "    report * Render a JSON report as HTML, diff two reports, merge shards' reports, print "
        "the report's schema: render, diff, merge, schema",
        "    config * The [[]tool.slam] table: schema, reference, check",
        "    calibrate * Choose certified equivalence bands from labelled pairs, or --evaluate them",
        "    review * Blind human review of candidate against reference",
        "    rescore * Score a run's stored answers again with the current configuration",
        "    cache * What pytest-slam keeps between runs in .slam: clear it",
    ])  # fmt: skip


def _id(path: tuple[str, ...]) -> str:
    return " ".join(path) or "slam"


@pytest.mark.parametrize("path", [p for p in ALL if p not in PASS_THROUGH], ids=_id)
def test_each_help_documents_everything_in_plain_text(
    pytester: pytest.Pytester, path: tuple[str, ...]
) -> None:
    parser = parser_at(path)
    missing = [name for name, text in helped(parser) if not text or text == argparse.SUPPRESS]
    assert not missing, f"slam {' '.join(path)}: no help for {missing}"
    result = pytester.run(*SLAM, *path, "--help")
    assert result.ret == 0, result.stderr.str()
    shown = " ".join(result.stdout.str().split())  # argparse wraps help to the terminal width
    assert shown.startswith("usage: slam")
    for name, text in helped(parser):
        first = " ".join(str(text).split("%(")[0].split()[:4])
        assert first in shown, f"slam {' '.join(path)} --help: {name}'s help is not shown"
    assert not RST.search(result.stdout.str()), result.stdout.str()


def test_refresh_has_its_own_help_not_pytests(pytester: pytest.Pytester) -> None:
    result = pytester.run(*SLAM, "golden", "refresh", "--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["usage: slam golden refresh [[]-h] [[]PYTEST ARGS ...]", "",
                                 "Re-record every golden answer (runs pytest; extra*"])  # fmt: skip
    assert "--slm-record" in result.stdout.str() and "--strict-markers" not in result.stdout.str()


@pytest.mark.parametrize("path", [p for p in ALL if p], ids=_id)
def test_slam_help_command_prints_that_commands_help(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_slam.cli import main

    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    own = capsys.readouterr().out
    assert main(["help", *path]) == 0
    assert capsys.readouterr().out == own


def test_slam_help_of_an_unknown_command_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_slam.cli import main

    assert main(["help", "report", "mrege"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "slam help: slam report has no command 'mrege' (its commands: render, diff, merge, schema)"
    ]


def test_refresh_is_described_as_pytest_pass_through(pytester: pytest.Pytester) -> None:
    result = pytester.run(*SLAM, "golden", "--help")
    result.stdout.fnmatch_lines(
        ["    refresh * Re-record every golden answer (runs pytest; extra*"]
    )
    assert not RST.search(result.stdout.str())


def test_the_cli_reference_lists_every_command() -> None:
    page = (Path(__file__).parents[2] / "docs/reference/cli.md").read_text(encoding="utf-8")
    for path in ALL[1:]:
        where = f"docs/reference/cli.md does not mention slam {' '.join(path)}"
        assert f"slam {' '.join(path)}" in page, where


@pytest.mark.parametrize("path", [p for p in ALL if p], ids=_id)
def test_each_command_describes_itself_and_names_its_subcommands(path: tuple[str, ...]) -> None:
    """``slam X --help`` opens with what X does (``slam config check --help`` had none), and a
    command with subcommands names each one there (``slam report`` named two of its four)."""
    parser = parser_at(path)
    assert parser.description, f"slam {' '.join(path)} --help: no description"
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name in (n for action in subs for n in action.choices):
        assert re.search(rf"\b{re.escape(name)}\b", parser.description), (
            f"slam {' '.join(path)} --help does not name its subcommand {name!r}: "
            f"{parser.description!r}"
        )
