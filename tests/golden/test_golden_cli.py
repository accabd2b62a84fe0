"""``slam golden import | stats | prune`` as the CLI will call them: argparse in, exit code out."""

from __future__ import annotations

import argparse
import json

from pytest_slam.cli.golden import COMMANDS, cmd_import, cmd_prune, cmd_stats
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.stale import stale_report_path, write_stale_report
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

MODULE = "tests/test_triage.py"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="slam golden")
    sub = parser.add_subparsers(dest="golden_command", required=True)
    for name, add, cmd in COMMANDS:
        add(sub.add_parser(name)).set_defaults(func=cmd)
    return parser.parse_args(argv)


def request(prompt: str) -> dict:
    return {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}]}


def test_import_stats_prune_round(tmp_path, capsys):
    root = tmp_path / "fixtures" / "slam"
    log = tmp_path / "log.jsonl"
    log.write_text(
        "".join(
            json.dumps({"prompt": p, "answer": p.upper(), "model": "gpt-4"}) + "\n"
            for p in ("a", "b", "c")
        )
    )
    args = parse("import", str(log), "--module", MODULE, "--root", str(root))
    assert args.func is cmd_import and cmd_import(args) == 0
    assert "imported 3, skipped 0 duplicates" in capsys.readouterr().out

    assert cmd_stats(parse("stats", "--root", str(root), "--json")) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["file"], row["entries"]) == ("openai-gpt-4/tests/test_triage.json", 3)

    stale = [(MODULE, request_key(request("b")))]
    write_stale_report(stale_report_path(root), "openai:gpt-4", stale)
    assert cmd_prune(parse("prune", "--root", str(root), "--dry-run")) == 0
    assert capsys.readouterr().out.startswith(f"would remove {MODULE} {stale[0][1]}")
    assert len(GoldenStore(root, "openai:gpt-4").load(MODULE).entries) == 3
    assert cmd_prune(parse("prune", "--root", str(root))) == 0
    assert "pruned 1 stale entries" in capsys.readouterr().out
    entries = GoldenStore(root, "openai:gpt-4").load(MODULE).entries
    assert set(entries) == {request_key(request("a")), request_key(request("c"))}
    assert not stale_report_path(root).exists()


def test_errors_are_one_line_on_stderr_with_exit_2(tmp_path, capsys):
    """(Every bad input of every command: test_cli_errors.py.)"""
    root = tmp_path / "golden"
    assert cmd_prune(parse("prune", "--root", str(root))) == 2
    err = capsys.readouterr().err
    assert "no stale report" in err and "run the whole suite with pytest to its end first" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    assert cmd_import(parse("import", str(bad), "--module", MODULE, "--root", str(root))) == 2
    assert f"{bad}:1:" in capsys.readouterr().err
    write_stale_report(stale_report_path(root), "openai:gpt-4o", [])
    assert cmd_prune(parse("prune", "--root", str(root), "--reference", "openai:gpt-4")) == 2
    assert "'openai:gpt-4o', not 'openai:gpt-4'" in capsys.readouterr().err


def test_prune_takes_the_reference_from_the_report(tmp_path, capsys):
    """The run may have named its reference on the command line: the report says which it was."""
    root = tmp_path / "golden"
    store = GoldenStore(root, "openai:gpt-4o")
    store.record(MODULE, GoldenRecord("", request("a"), [GoldenAnswer("A")]))
    store.flush()
    write_stale_report(
        stale_report_path(root), "openai:gpt-4o", [(MODULE, request_key(request("a")))]
    )
    assert cmd_prune(parse("prune", "--root", str(root))) == 0
    assert "pruned 1 stale entries; undo with: slam golden restore " in capsys.readouterr().out
    assert not store.path_for(MODULE).exists()
