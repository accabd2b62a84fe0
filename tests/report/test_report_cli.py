"""``slam report`` subcommands: render (JSON -> HTML) and diff (OLD NEW, exit 1 on regression)."""

from __future__ import annotations

import argparse
import copy

import report_helpers as synth

from pytest_slam.cli.report import (
    add_diff_arguments,
    add_render_arguments,
    cmd_diff,
    cmd_render,
)
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.jsonreport import write_json


def _args(add, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add(parser)
    return parser.parse_args(argv)


def _report(path, outcomes):
    return write_json(path, aggregate(outcomes, synth.run_info()), outcomes)


def test_render_writes_html_next_to_the_json(tmp_path, capsys) -> None:
    report = _report(tmp_path / "run.json", synth.outcomes())
    assert cmd_render(_args(add_render_arguments, str(report))) == 0
    html = tmp_path / "run.html"
    assert capsys.readouterr().out == f"slam report render: wrote {html}\n"
    assert 'class="point reference"' in html.read_text()


def test_render_to_a_named_file_and_bad_input(tmp_path, capsys) -> None:
    report = _report(tmp_path / "run.json", synth.outcomes())
    out = tmp_path / "site" / "index.html"
    assert cmd_render(_args(add_render_arguments, str(report), "-o", str(out))) == 0
    assert out.is_file()
    assert cmd_render(_args(add_render_arguments, str(tmp_path / "nope.json"))) == 2
    assert "slam report render: pytest-slam report not found" in capsys.readouterr().err


def test_diff_exit_status_follows_regressions(tmp_path, capsys) -> None:
    old = _report(tmp_path / "old.json", synth.outcomes())
    worse = copy.deepcopy(synth.outcomes())
    for o in worse:
        for c in o["calls"]:
            if c["e2e_ms"] is not None:
                c["e2e_ms"] *= 2
    new = _report(tmp_path / "new.json", worse)
    assert cmd_diff(_args(add_diff_arguments, str(old), str(old))) == 0
    capsys.readouterr()
    # the synthetic runs measure a few calls a model: no p95 by default (20 calls a side) ...
    assert cmd_diff(_args(add_diff_arguments, str(old), str(new))) == 0
    assert "note: E2E p95 not compared for 12 row(s)" in capsys.readouterr().out
    few = ("--latency-min-samples", "1")  # ... and their doubled latency counts once they may
    assert cmd_diff(_args(add_diff_arguments, str(old), str(new), *few)) == 1
    out = capsys.readouterr().out.splitlines()
    assert "  - qwen2.5-1.5b: e2e_p95_ms 640 ms -> 1280 ms" in out
    # a tolerance above +100% lets the doubled latency pass
    assert cmd_diff(_args(add_diff_arguments, str(old), str(new), *few,
                          "--latency-increase-pct", "150")) == 0  # fmt: skip
    assert "tolerances: equivalence drop > 0.02, E2E p95 up > 150% and > 50 ms, cost up > 10%" in (
        capsys.readouterr().out
    )


def test_diff_with_an_unreadable_report(tmp_path, capsys) -> None:
    old = _report(tmp_path / "old.json", synth.outcomes())
    (tmp_path / "new.json").write_text("{")
    assert cmd_diff(_args(add_diff_arguments, str(old), str(tmp_path / "new.json"))) == 2
    assert "is not a pytest-slam JSON report: not valid JSON" in capsys.readouterr().err
