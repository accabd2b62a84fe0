"""Bad input gets one readable line that names the thing and the fix, never a traceback wall."""

from __future__ import annotations

import pytest

SWAPPED = """
import openai, pytest

pytestmark = pytest.mark.slm

def test_one():
    openai.OpenAI().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])

def test_two():
    openai.OpenAI().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "yo"}])
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(test_swapped=SWAPPED)
    return pytester


def test_unknown_model_is_a_usage_error_listing_known_models(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--slm-models=smollm2-135m,tiny-llama")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*unknown model 'tiny-llama'. Known models: curated, smollm2-135m.*"]
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("llamacpp:weights.bin", "*'llamacpp:weights.bin': a llamacpp spec names a .gguf file*"),
        ("http://127.0.0.1:8000/v1", "*an endpoint spec is http://HOST:PORT/v1#MODEL_ID*"),
        ("a,,b", "*--slm-models*empty entry*"),
    ],
)
def test_malformed_specs_are_usage_errors(suite: pytest.Pytester, spec: str, message: str) -> None:
    result = suite.runpytest(f"--slm-models={spec}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_unreachable_endpoint_fails_each_test_with_one_line(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--slm-models=http://127.0.0.1:9/v1#ghost")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*pytest-slam: model 'ghost' at http://127.0.0.1:9/v1 is unreachable (ConnectionRefusedError*). "
            "Start the server or fix the model's base_url.",
        ]
    )
    out = result.stdout.str()
    assert (
        out.count("is unreachable") >= 2 and "Traceback" not in out and "_base_client.py" not in out
    )


def test_vllm_without_gpu_says_exactly_that(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--slm-models=vllm:Qwen/Qwen2.5-0.5B-Instruct")
    # the first call starts the engines and fails on that line; the next test errors at its start
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*model 'vllm:Qwen/Qwen2.5-0.5B-Instruct' is served by vLLM, which needs vLLM and a CUDA GPU; "
            "this machine has neither vLLM nor a CUDA GPU*",
        ]
    )


def test_bad_tool_slam_key_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject="[tool.slam]\nrefernce = 'openai:gpt-4'\n")
    pytester.makepyfile(test_x="def test_x(): pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*?tool.slam? has unknown keys ?'refernce'?; did you mean 'reference'? known keys: *"]
    )


def test_unwritable_report_path_is_said_at_the_start(suite: pytest.Pytester) -> None:
    result = suite.runpytest(
        "--slm-models=http://127.0.0.1:9/v1#ghost", "--slm-report=/proc/nope/r.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--slm-report=/proc/nope/r.json: cannot write there (No such file or directory)*"]
    )
