"""`slam review` as the user runs it: the one-line errors, the filters, the stats and the run summary."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from patience import patient
from review_helpers import http, make_project, processes_holding, review_server, run_suite, slam
from slam_helpers import wait_for

from pytest_slam.golden.store import GoldenStore
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.pairs import collect
from pytest_slam.review.verdicts import make_verdict, save_verdicts


def test_no_report_says_the_pytest_command_that_writes_it(pytester) -> None:
    done = slam(pytester.path, "review", "--no-browser")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "slam review: pytest-slam report not found: slam-report.json; "
        "write one with `pytest --slm-report=slam-report.json`"
    ]


def test_no_goldens_says_the_pytest_command_that_records_them(pytester) -> None:
    project = make_project(pytester)
    (project / "__slam__/gpt-4/test_product.json").unlink()
    done = slam(project, "review", "--stats")
    assert done.returncode == 2
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
    assert nothing.returncode == 2 and "no pair matches --model gpt-5" in nothing.stderr


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
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"slam review: cannot listen on 127.0.0.1:{port} (Address already in use); "
        "leave out --port to take a free one"
    ]
    review = project / "__slam__/gpt-4/test_product.review.jsonl"
    review.write_text('{"key": "k"}\n')
    done = slam(project, "review", "--stats")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"slam review: {review.relative_to(project)}:1: not a review")


# A browser as `slam review` starts one ($BROWSER): it keeps its argv, opens the page and stays open
# until the test is done looking at every process's argv.
BROWSER = """#!{python}
import json, pathlib, sys, time, urllib.request
out = pathlib.Path({out!r})
(out / "argv.json").write_text(json.dumps(sys.argv))
with urllib.request.urlopen(sys.argv[1], timeout=60) as resp:  # follows the launch redirect
    page = resp.read().decode()
    seen = {{"status": resp.status, "url": resp.url, "pairs": page.count('<section class="pair"')}}
(out / "opened.json").write_text(json.dumps(seen))
deadline = time.monotonic() + 120
while not (out / "close").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
"""


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/cmdline").exists(), reason="reads every process's argv in /proc (Linux)"
)


@needs_proc
def test_no_process_argv_holds_the_token_while_the_browser_is_open(pytester, tmp_path) -> None:
    project = make_project(pytester)
    out = tmp_path / "browser"
    out.mkdir()
    browser = out / "browser"
    browser.write_text(BROWSER.format(python=sys.executable, out=str(out)))
    browser.chmod(0o755)
    try:
        with review_server(project, "--reviewer", "ana", browser=browser) as url:
            token = urlsplit(url).path.strip("/")
            wait_for((out / "opened.json").exists, 60, "the browser to open the review page")
            assert json.loads((out / "opened.json").read_text()) == {
                "status": 200, "url": url, "pairs": 6,
            }  # fmt: skip
            assert processes_holding(str(browser))  # the browser is still open...
            assert processes_holding(token) == []  # ...and no process's argv holds the token
            (launch,) = json.loads((out / "argv.json").read_text())[1:]
            assert launch.startswith(f"http://127.0.0.1:{urlsplit(url).port}/launch/")
            assert http(launch) == (403, "forbidden: this launch link was used already; open "
                                         "the URL `slam review` printed")  # fmt: skip
    finally:
        (out / "close").touch()


@needs_proc
def test_the_argv_scan_sees_other_processes(tmp_path) -> None:
    """The scan above could fail: a process with a marker in its argv is found."""
    marker = f"slam-marker-{tmp_path.name}"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        wait_for(lambda: processes_holding(marker), 30, "the marked process")
        assert [pid for pid, _ in processes_holding(marker)] == [sleeper.pid]
    finally:
        sleeper.kill()
        sleeper.wait(timeout=patient(30))


def test_stats_say_how_many_more_reviews_a_band_or_the_judge_needs(pytester) -> None:
    """3 "tie" (acceptable) and 3 "loss" verdicts: far from the 230 pairs the judge must have
    called equivalent, or the pairs a band needs among 5 scorers at the default targets."""
    project = make_project(pytester)
    store = GoldenStore(project / "__slam__", "gpt-4")
    pairs, _ = collect(load_report(project / "slam-report.json").outcomes, store)
    verdict = {"qwen-small": "tie", "llama-tiny": "loss"}
    for p in pairs:
        v = make_verdict(key=p.key, model=p.model, answer_hash=p.answer_hash,
                         reference_hash=p.reference_hash, verdict=verdict[p.model],
                         reviewer="ana")  # fmt: skip
        save_verdicts(store, p.module, [v])
    said = " ".join(slam(project, "review", "--stats").stdout.split())
    assert (
        "slam review: labels needed to certify (pass error <= 0.05, fail error <= 0.1 at "
        "95%); you have 6 labelled pair(s): 3 acceptable, 3 not" in said
    )
    assert (
        "the judge's equivalent: needs 230 pairs the judge called equivalent; has at most 3: "
        "review 227 more" in said
    )
    assert "the judge's different: needs 114 pairs the judge called different" in said
    assert re.search(
        r"a pass band \(\d scorers\): needs \d+ pairs labelled acceptable; has 3", said
    )
