"""The ``slam`` command: golden answers, reports, configuration, calibration, review, rescoring.

    slam golden refresh [PYTEST ARGS]   re-record every golden answer the tests ask for
    slam golden import FILE --module tests/test_x.py
    slam golden stats | slam golden prune | slam golden restore [TRASH]
    slam golden promote MODEL --report RUN.json   a candidate's answers become the reference's
    slam golden unpromote BASELINE      put the answers a promote replaced back
    slam golden merge IN... -o OUT      goldens recorded apart (shards, branches) merged
    slam golden merge-driver %O %A %B %P   the git merge driver (--install sets it up)
    slam report RUN.json [-o RUN.html]  render the HTML report from a saved JSON report
    slam report diff OLD.json NEW.json  what regressed and improved; exit 1 on regression
    slam report merge SHARD.json... -o RUN.json   the shards' reports as one run, gated
    slam report schema                  the JSON Schema every report validates against
    slam calibrate [--report RUN.json | --labels FILE.jsonl] [--dry-run]   certified bands from verdicts
    slam review [--stats] [--model M] [--test T]   blind human review page, or its figures
    slam rescore RUN.json [-o NEW.json] [--html NEW.html]   verdicts again, no model called
    slam config schema | reference | check   the [tool.slam] table's JSON Schema, docs, validation
    slam help [COMMAND...]              a command's help, as slam COMMAND --help

Golden commands take their defaults (folder, reference) from ``[tool.slam]`` in ./pyproject.toml.
Every command exits by one table (``cli/exits.py``, in the README): 2 is bad input everywhere.
Every help text is plain text (no RST markup): ``tests/cli/test_cli_help.py`` pins it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.cli import exits
from pytest_slam.errors import SlamError
from pytest_slam.project import from_table, read_table
from pytest_slam.run.inputs import options
from pytest_slam.settings import Settings, SettingsError
from pytest_slam.util.foreign import subcommands

if TYPE_CHECKING:  # argparse's action is generic to type checkers only
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def project_settings(cwd: Path) -> Settings:
    """./pyproject.toml's ``[tool.slam]``; a bad one stops every command: one line, exit 2."""
    try:
        return from_table(read_table(cwd / "pyproject.toml"), root=cwd)
    except SettingsError as exc:
        print(f"slam: {exc}", file=sys.stderr)
        raise SystemExit(exits.BAD_INPUT) from None


def help_settings(cwd: Path) -> Settings:
    """The project's settings for a help text's defaults; the built-in ones when the table is
    bad: `slam ... --help` is how a user finds the fix, so it never fails on the table."""
    try:
        return from_table(read_table(cwd / "pyproject.toml"), root=cwd)
    except SettingsError:
        return Settings()


def refresh(pytest_args: list[str]) -> int:
    """Run the suite in record-all mode: the real reference answers every request again (only
    the reference, unless the arguments ask for candidates: ``options.reference_only``).

    ``slam config check`` runs first and a refresh stops on its lines (exit 2): a paid recording
    should not start on a table that fails later. A store-wide change killed earlier is recovered
    first (one line, ``golden.journal``); the run's every write then holds the store lock, so no
    promote or prune lands in the middle of one.
    """
    from pytest_slam.cli.config_docs import cmd_check
    from pytest_slam.cli.golden import _fail, say_recovered
    from pytest_slam.golden.fileformat import GoldenError
    from pytest_slam.golden.journal import journal_path
    from pytest_slam.golden.store import GoldenStore

    checked = cmd_check()
    if checked != exits.OK:
        return checked
    settings = project_settings(Path.cwd())
    store = GoldenStore(Path(settings.golden_dir), settings.reference)
    try:
        if journal_path(store.root, store.lock_dir).exists():
            with store.transaction("refresh"):
                say_recovered(store)
    except GoldenError as exc:
        return _fail(exc)
    argv = [sys.executable, "-m", "pytest", f"{options.RECORD}=all", *pytest_args]
    print("slam golden refresh: " + " ".join(argv[2:]), flush=True)
    return subprocess.call(argv)


def command(sub: Subparsers, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose help line (in its parent's --help) is also its own --help description."""
    return sub.add_parser(name, help=text, description=text)


def golden_parser(sub: Subparsers, settings: Settings) -> None:
    from pytest_slam.cli import golden_merge, promote_cmd
    from pytest_slam.cli.golden import COMMANDS, HELP

    golden = command(
        sub,
        "golden",
        "Golden answers of the reference model: refresh, import, "
        "stats, prune, restore, promote, unpromote, merge, merge-driver",
    )
    gsub = golden.add_subparsers(dest="golden_command", required=True)
    refresh_parser = command(
        gsub, "refresh", "Re-record every golden answer (runs pytest; extra args pass through)"
    )
    refresh_parser.add_argument(
        "pytest_args",
        nargs="*",
        metavar="PYTEST ARGS",
        help=f"Passed to pytest {options.RECORD}=all as given (pytest --help lists them)",
    )
    helps = {**HELP, **promote_cmd.HELP, **golden_merge.HELP}
    for name, add, cmd in (*COMMANDS, *promote_cmd.COMMANDS, *golden_merge.COMMANDS):
        parser = add(command(gsub, name, helps[name]))
        parser.set_defaults(
            func=cmd, project_root=Path(settings.golden_dir), project_reference=settings.reference
        )


def report_parser(sub: Subparsers) -> None:
    from pytest_slam.cli.report import (
        add_diff_arguments,
        add_merge_arguments,
        add_render_arguments,
        cmd_diff,
        cmd_merge,
        cmd_render,
    )

    report = command(
        sub,
        "report",
        "Render a JSON report as HTML, diff two reports, merge shards' reports, print the "
        "report's schema: render, diff, merge, schema",
    )
    rsub = report.add_subparsers(dest="report_command", required=True)
    add_render_arguments(
        command(
            rsub,
            "render",
            "Render a JSON report as one self-contained HTML "
            "file (slam report RUN.json is short for it)",
        )
    )
    add_diff_arguments(
        command(
            rsub,
            "diff",
            "Compare two JSON reports: what regressed and what "
            "improved beyond the tolerances; exit 1 on a regression",
        )
    )
    add_merge_arguments(
        command(
            rsub,
            "merge",
            "Merge the JSON reports of a suite's shards into "
            "the whole run's report and gate; exit as the whole run",
        )
    )
    rsub.choices["merge"].set_defaults(func=cmd_merge)
    command(rsub, "schema", "Print the JSON Schema of the JSON report").set_defaults(
        func=_print_report_schema
    )
    rsub.choices["render"].set_defaults(func=cmd_render)
    rsub.choices["diff"].set_defaults(func=cmd_diff)


def _print_report_schema(args: argparse.Namespace) -> int:
    from pytest_slam.report.schema import schema_text

    print(schema_text(), end="")
    return 0


def config_parser(sub: Subparsers) -> None:
    from pytest_slam.cli.config_docs import add_commands

    add_commands(command(sub, "config", "The [tool.slam] table: schema, reference, check"))


def calibrate_parser(sub: Subparsers, settings: Settings) -> None:
    from pytest_slam.cli.calibrate_cmd import add_arguments, cmd_calibrate

    parser = command(
        sub,
        "calibrate",
        "Choose certified equivalence bands from labelled pairs, or --evaluate them",
    )
    add_arguments(parser).set_defaults(
        func=cmd_calibrate,
        root=Path(settings.golden_dir),
        reference=settings.reference,
        settings=settings,
    )


def review_parser(sub: Subparsers, settings: Settings) -> None:
    from pytest_slam.cli.review import add_arguments, cmd_review

    parser = command(sub, "review", "Blind human review of candidate against reference")
    add_arguments(parser, settings.report).set_defaults(
        func=cmd_review, root=Path(settings.golden_dir), reference=settings.reference
    )


def rescore_parser(sub: Subparsers, settings: Settings) -> None:
    from pytest_slam.cli.rescore import add_arguments, cmd_rescore

    parser = command(
        sub, "rescore", "Score a run's stored answers again with the current configuration"
    )
    add_arguments(parser).set_defaults(func=cmd_rescore, settings=settings)


def cache_parser(sub: Subparsers, settings: Settings) -> None:
    from pytest_slam.cli.cache_cmd import add_arguments, cmd_clear

    cache = command(sub, "cache", "What pytest-slam keeps between runs in .slam: clear it")
    csub = cache.add_subparsers(dest="cache_command", required=True)
    clear = command(
        csub,
        "clear",
        "Remove the candidates' kept answers (.slam/cache), a refresh's paid unrecorded "
        "reference answers (.slam/paid) and the notes of missed golden requests (.slam/missed)",
    )
    add_arguments(clear).set_defaults(func=cmd_clear, root=Path(settings.golden_dir))


DESCRIPTION = (
    "pytest-slam's command line: golden answers of the reference model, reports of a run, the "
    "[tool.slam] configuration, calibration of the verdict bands, blind human review and rescoring. "
    "Run 'slam COMMAND --help' for a command's options."
)


def build_parser(settings: Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slam", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    golden_parser(sub, settings)
    report_parser(sub)
    config_parser(sub)
    calibrate_parser(sub, settings)
    review_parser(sub, settings)
    rescore_parser(sub, settings)
    cache_parser(sub, settings)
    help_parser(sub, parser)
    return parser


def help_parser(sub: Subparsers, top: argparse.ArgumentParser) -> None:
    parser = command(sub, "help", "Print a command's help: slam help report merge")
    parser.add_argument(
        "topic", nargs="*", metavar="COMMAND", help="The command (and subcommand) to explain"
    )
    parser.set_defaults(func=lambda args: _print_help(top, args.topic))


def _print_help(top: argparse.ArgumentParser, topic: list[str]) -> int:
    """``slam help A B`` prints what ``slam A B --help`` prints; an unknown name is bad input."""
    parser = top
    for depth, name in enumerate(topic):
        choices = subcommands(parser)
        if name not in choices:
            where = " ".join(["slam", *topic[:depth]])
            known = ", ".join(choices) or "none"
            return exits.refuse("help", f"{where} has no command {name!r} (its commands: {known})")
        parser = choices[name]
    parser.print_help()
    return exits.OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["golden", "refresh"] and not {"-h", "--help"} & set(argv[2:]):
        return refresh(argv[2:])  # its own --help is argparse's, below; pytest's: pytest --help
    if (
        argv[:1] == ["report"]
        and len(argv) > 1
        and argv[1] not in ("render", "diff", "merge", "schema", "-h", "--help")
    ):
        argv.insert(
            1, "render"
        )  # `slam report RUN.json` is short for `slam report render RUN.json`
    # `slam config ...` reads the table itself (check lists every problem), or not at all; help
    # is printed whatever the table holds (its defaults then are the built-in ones)
    asks_help = argv[:1] == ["help"] or bool({"-h", "--help"} & set(argv))
    if argv[:1] == ["config"]:
        settings = Settings()
    elif asks_help:
        settings = help_settings(Path.cwd())
    else:
        settings = project_settings(Path.cwd())
    args = build_parser(settings).parse_args(argv)
    try:
        return int(args.func(args))
    except SlamError as exc:  # one a command left uncaught, of any kind: one line, its status
        exits.refuse(_named(args), exc)
        return exits.status_of(exc)


def _named(args: argparse.Namespace) -> str:
    """The command as typed: ``rescore``, ``golden promote``, ``config check``."""
    sub = getattr(args, f"{args.command}_command", None)
    return f"{args.command} {sub}" if isinstance(sub, str) else str(args.command)


if __name__ == "__main__":
    sys.exit(main())
