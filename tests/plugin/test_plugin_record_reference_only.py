"""Recording the reference records the reference (issue 52): ``pytest --slm-record=new`` and
``slam golden refresh`` ask only the reference unless candidates are asked for (``--slm-models``
or ``--slm-with-candidates``); a refresh checks the configuration first.

Real pytest runs (pytester) of the three-question suite of ``plugin_golden_helpers.py``: the
reference and the candidate ``mini`` are FakeOpenAIs on loopback, each counting the requests it
was sent, so "the candidate was never asked" is its hit count. The suite's own conftest sets
``SLAM_WITH_CANDIDATES`` for the older record-and-compare runs; these tests remove it, as a
user's environment has it.
"""

from __future__ import annotations

import pytest
from plugin_golden_helpers import GOLDEN, QUESTIONS, make_suite, run, slam
from report_helpers import read_report


@pytest.fixture(autouse=True)
def _as_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLAM_WITH_CANDIDATES", raising=False)


def test_recording_asks_only_the_reference_and_replay_then_runs_the_candidate(
    pytester, fake_gpt4, mini
):
    make_suite(pytester, fake_gpt4, mini)
    recorded = run(pytester, "--slm-record=new", "--slm-report=recorded.json")
    recorded.assert_outcomes(passed=3)
    assert fake_gpt4.hits == 3 and mini.hits == 0  # each request once, to the reference alone
    recorded.stdout.fnmatch_lines([f"golden answers written: {GOLDEN}/test_product.json"])
    said = " ".join(recorded.stdout.str().split())
    assert (
        "recorded the reference (gpt-4) only; " in said
        and "the candidates (mini) were not run: `pytest` replays them against these goldens, "
        "or add --slm-with-candidates"
        in said
    )
    fake_gpt4.stop()
    replayed = run(pytester)
    replayed.assert_outcomes(passed=3)
    assert mini.hits == 3  # the candidate runs in the replay, against what was recorded


@pytest.mark.parametrize("asked", ["--slm-with-candidates", "--slm-models=mini"])
def test_candidates_asked_for_run_in_the_recording(pytester, fake_gpt4, mini, asked):
    make_suite(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new", asked).assert_outcomes(passed=3)
    assert fake_gpt4.hits == 3 and mini.hits == 3


def test_a_recording_run_reports_the_reference_against_its_own_answers(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=all", "--slm-report=r.json").assert_outcomes(passed=3)
    report = read_report(pytester.path / "r.json")
    assert [row["model"] for row in report["models"]] == ["gpt-4"]
    texts = sorted(call["text"] for o in report["outcomes"] for call in o["calls"])
    assert texts == sorted("GPT-4 says: " + q for q in QUESTIONS)
    assert fake_gpt4.hits == 3 and mini.hits == 0  # its calls were the recordings, not again


def test_refresh_asks_only_the_reference(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    done = slam(pytester, "golden", "refresh", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout + done.stderr
    assert fake_gpt4.hits == 3 and mini.hits == 0
    assert "a run has what it needs" in done.stdout  # `slam config check` ran first


def test_refresh_stops_at_the_config_check_with_its_lines(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    pyproject = pytester.path / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        + '\n[tool.slam.models.qwen]\nprovider = "llamacpp"\nmodel = "/nowhere/qwen.gguf"\n'
    )
    done = slam(pytester, "golden", "refresh")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("slam config check: ") for line in lines), lines
    assert "model 'qwen': no GGUF file" in done.stderr
    assert fake_gpt4.hits == 0 and mini.hits == 0  # nothing ran
