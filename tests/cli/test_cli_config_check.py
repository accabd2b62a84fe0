"""``slam config check`` lists every independent problem of ``[tool.slam]`` in one run.

A user fixing a table one error per run met the next only after rerunning: a bad key stopped the
check before the models were resolved, and the first bad model table hid the others. Each case runs
the real entry point (``pytest_slam.cli.main``) in a real project folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_slam.cli import main

PREFIX = "slam config check: "


def check(
    tmp_path: Path, toml: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    (tmp_path / "pyproject.toml").write_text("[tool.slam]\n" + toml, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    try:
        status = main(["config", "check"])
    except SystemExit as exc:  # the old code stopped at the table's first stage here
        status = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err, out + err
    return status, err.splitlines()


THREE = """\
candidates = ["ghost-model", "api"]
smaples = 3

[tool.slam.models.api]
base_url = "localhost:8000"
model = "m"
"""


def test_three_independent_errors_are_listed_in_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo'd key, an unknown candidate and a base_url without a scheme: one line each."""
    status, lines = check(tmp_path, THREE, monkeypatch, capsys)
    assert status == 2
    assert all(line.startswith(PREFIX) for line in lines), lines
    body = [line.removeprefix(PREFIX) for line in lines]
    assert body[0].startswith("[tool.slam] has unknown keys ['smaples']; did you mean 'samples'?")
    assert body[1].startswith("unknown model 'ghost-model'. Known models:")
    assert body[2].startswith("model 'api': base_url 'localhost:8000': not an http(s) URL")
    assert body[2].endswith("write it as http://HOST:PORT/v1")
    assert body[3:] == ["3 problems; fix them all, then check again"]


TWO_TABLES = """\
candidates = ["a", "b", "c"]
repeat = 0

[tool.slam.models.a]
provider = "tgi"
timeout_s = -1

[tool.slam.models.b]
base_url = "http://127.0.0.1:9/v1"
basurl = "http://x/v1"

[tool.slam.models.c]
base_url = "http://127.0.0.1:9/v1"

[tool.slam.gate]
min_pass_rate = 95
max_cost_ratio = "x"
"""


def test_each_bad_model_table_and_section_key_is_named_and_their_models_are_skipped_aloud(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first bad model table, or gate key, no longer hides the next; a model whose table is
    bad is not resolved (it would read as unknown), and the check says so."""
    status, lines = check(tmp_path, TWO_TABLES, monkeypatch, capsys)
    body = [line.removeprefix(PREFIX) for line in lines]
    assert status == 2
    assert body == [
        "[tool.slam] repeat = 0 must be greater than or equal to 1.",
        body[1],
        "[tool.slam.models.a] timeout_s = -1 must be greater than 0.",
        body[3],
        "[tool.slam.gate] min_pass_rate = 95 must be a fraction in 0..1, e.g. min_pass_rate = 0.9"
        " for 90%",
        "[tool.slam.gate] max_cost_ratio = 'x' must be a float, e.g. max_cost_ratio = 0.9",
        "not resolved until the lines above are fixed: model 'a', model 'b'",
        "6 problems; fix them all, then check again",
    ]
    assert body[1].startswith("[tool.slam.models.a] provider='tgi'; use one of")
    assert body[3].startswith("[tool.slam.models.b] has unknown keys ['basurl']; did you mean")
    assert "unknown model" not in "\n".join(body)  # 'a' and 'b' were skipped, 'c' resolved


def test_a_bad_candidates_key_leaves_its_models_unresolved_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With candidates unreadable the embedded default is not checked in their place."""
    toml = 'candidates = 5\nreference = "ghost"\n'
    status, lines = check(tmp_path, toml, monkeypatch, capsys)
    assert status == 2
    assert [line.removeprefix(PREFIX) for line in lines] == [
        "[tool.slam] candidates = 5 must be a list of model names, e.g. candidates = "
        '["smollm2-135m", "qwen"].',
        lines[1].removeprefix(PREFIX),
        "not resolved until the lines above are fixed: the models named by [tool.slam] candidates",
        "2 problems; fix them all, then check again",
    ]
    assert lines[1].startswith(PREFIX + "unknown model 'ghost'.")


def test_one_problem_is_still_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, lines = check(tmp_path, "samples = 'three'\n", monkeypatch, capsys)
    assert (status, lines) == (
        2,
        [PREFIX + "[tool.slam] samples = 'three' must be a whole number."],
    )


def test_a_run_of_pytest_still_stops_at_its_start(pytester: pytest.Pytester) -> None:
    """pytest's own start is unchanged: the table is checked before any test, exit 4."""
    pytester.makefile(".toml", pyproject="[tool.slam]\n" + THREE)
    pytester.makepyfile(test_x="def test_x(): pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = [line for line in result.stderr.lines if "pytest-slam" in line]
    assert said[0].startswith("ERROR: pytest-slam: [tool.slam] has unknown keys ['smaples']")
    assert len(said) == 1 and "ghost-model" not in result.stderr.str()
