"""The --help text is part of the interface: pinned here, option by option."""

from __future__ import annotations

import pytest

from pytest_slam.run.inputs import options


def test_help_lists_every_option_in_one_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "pytest-slam: model-swap regression testing:",
            "  --slm-models=A,B,...*Run opted-in tests once per model: names from*",
            "*--slm-record={none,new,all}*",
            "*Golden answers: none replays only (default, for CI);*",
            "  --slm-with-candidates",
            "*With --slm-record: run the candidates too*",
            "  --slm-refresh-golden*Short for --slm-record=all",
            "  --slm-prune*Remove golden entries that no test asked for in this*",
            "  --slm-reference=SPEC*",
            "  --slm-golden-dir=DIR*",
            "  --slm-samples=N*",
            "  --slm-repeat=N*",
            "  --slm-report=PATH.json*",
            "  --slm-html=PATH.html*",
            "  --slm-baseline=PATH.json*",
            "  --slm-baseline-fail=METRIC:LIMIT,...",
            "*How far a metric may move from the baseline, over*",
            "  --slm-block-network*Make any connection off this machine during an*",
            "  --slm-allowed-hosts=HOST,...",
            "*Hosts opted-in tests may still reach, neither blocked*",
            "  --slm-heartbeat=SECONDS",
            "*Name each model call still running after SECONDS, again*",
            "  --slm-max-tokens-cap=N",
            "*Most output tokens a candidate call without its own*",
        ]
    )
    result.stdout.fnmatch_lines(["  slm_paths (paths):*Folders whose tests run once per model*"])
    result.stdout.fnmatch_lines(
        ["  slm_allowed_hosts (string):", "*Hosts opted-in tests may still reach*"]
    )
    result.stdout.fnmatch_lines(
        ["  slm_heartbeat (string):", "*Seconds after which a model call still running is named*"]
    )
    flags = [
        value
        for value in vars(options).values()
        if isinstance(value, str) and value.startswith("--")
    ]
    assert all(f.startswith("--slm-") for f in flags) and len(flags) == 19
    assert all(f in result.stdout.str() for f in flags)


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.slm: run this test once per selected model*",
            "@pytest.mark.slm_equivalence(by='fuzzy', at_least=None, **options):*",
            "@pytest.mark.slm_budget(e2e_ms=None, ttft_ms=None, *",
        ]
    )


def test_bad_option_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--slm-repeat=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slm-repeat*'0' is not a whole number of at least 1*"])
    result = pytester.runpytest("--slm-record=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slm-record: 'sometimes' is not a record mode: none*"])
    result = pytester.runpytest("--slm-baseline-fail=p95_e2e_ms:fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slm-baseline-fail: 'p95_e2e_ms:fast': write METRIC:LIMIT*"])
    result = pytester.runpytest("-o", "slm_allowed_hosts=db(")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option slm_allowed_hosts: 'db(' is not a host or a*"])
