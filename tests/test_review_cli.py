"""`slam review` as the user runs it: the one-line errors, the filters, the stats and the run summary."""

from __future__ import annotations

import re
import socket

from review_helpers import http, make_project, review_server, run_suite, slam

from pytest_slam.golden.store import GoldenStore
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.pairs import collect
from pytest_slam.review.verdicts import make_verdict, save_verdicts


def test_no_report_says_the_pytest_command_that_writes_it(pytester) -> None:
    done = slam(pytester.path, "review", "--no-browser")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "slam review: pytest-slam report not found: slam-report.json; "
        "write one with `pytest --slm-report=slam-report.json`"
    ]


def test_no_goldens_says_the_pytest_command_that_records_them(pytester) -> None:
    project = make_project(pytester)
    (project / "__slam__/gpt-4/test_product.json").unlink()
    done = slam(project, "review", "--stats")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "slam review: nothing to review in slam-report.json (6 answer(s) have no golden answer); "
        "record the reference and write the report with "
        "`pytest --slm-record=new --slm-report=slam-report.json`"
    ]


def test_filters_pick_one_model_and_one_test(pytester) -> None:
    project = make_project(pytester)
    with review_server(project, "--model", "qwen-small", "--test", "snippet") as url:
        page = http(url)[1]
    assert page.count('<section class="pair"') == 1 and "test_product.py::test_snippet" in page
    nothing = slam(project, "review", "--no-browser", "--model", "gpt-5")
    assert nothing.returncode == 1 and "no pair matches --model gpt-5" in nothing.stderr


def test_stats_and_the_run_summary_show_the_verdicts(pytester) -> None:
    project = make_project(pytester)
    store = GoldenStore(project / "__slam__", "gpt-4")
    pairs, _ = collect(load_report(project / "slam-report.json").outcomes, store)
    verdict = {"qwen-small": "tie", "llama-tiny": "loss"}
    for p in pairs:
        v = make_verdict(key=p.key, model=p.model, answer_hash=p.answer_hash,
                         reference_hash=p.reference_hash, verdict=verdict[p.model],
                         reviewer="ana")  # fmt: skip
        save_verdicts(store, p.module, [v])
    stats = slam(project, "review", "--stats")
    assert stats.returncode == 0, stats.stderr
    out = stats.stdout.splitlines()
    assert out[0].startswith("human review: 6 verdict(s) by 1 reviewer(s)")
    assert out[1].split() == ["model", "n", "win", "tie", "loss", "both", "bad", "not", "worse"]
    assert re.match(r"llama-tiny +3 +0% \[0%-56%\] +0% \[0%-56%\] +100% \[44%-100%\]", out[2])
    assert re.match(r"qwen-small +3 +0% \[0%-56%\] +100% \[44%-100%\]", out[3])
    # fuzzy at_least 0.6 passed exactly the qwen-small answers: full agreement with the humans
    assert "  fuzzy: kappa 1.00 [" in stats.stdout

    result = run_suite(pytester)  # the next run of the suite names the human verdicts
    lines = " ".join(result.stdout.lines)
    assert "human review: llama-tiny not worse than the reference in 0/3 (0% [0%-56%]); " \
           "qwen-small not worse than the reference in 3/3 (100% [44%-100%]); " \
           "details: slam review --stats" in " ".join(lines.split())  # fmt: skip


def test_a_busy_port_and_a_broken_review_file_are_one_line_each(pytester) -> None:
    project = make_project(pytester)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = slam(project, "review", "--no-browser", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"slam review: cannot listen on 127.0.0.1:{port} (Address already in use); "
        "leave out --port to take a free one"
    ]
    review = project / "__slam__/gpt-4/test_product.review.jsonl"
    review.write_text('{"key": "k"}\n')
    done = slam(project, "review", "--stats")
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"slam review: {review.relative_to(project)}:1: not a review")
