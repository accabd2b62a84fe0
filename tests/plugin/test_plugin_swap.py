"""The transparent swap, end to end: real pytest sessions (pytester) against a real llama.cpp engine.

Product code is written the way teams write it and never mentions pytest-slam; the inner tests check
that every OpenAI SDK call reached the candidate and was recorded.
"""

from __future__ import annotations

import pytest

PRODUCT = """
import openai
from openai import AsyncOpenAI, OpenAI

client = OpenAI()  # built at import time, before any test runs

def ask(question):
    r = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}], temperature=0, max_tokens=8)
    return r.choices[0].message.content
"""


@pytest.fixture
def product(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(product=PRODUCT)
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    return pytester


def test_import_time_client_reaches_the_embedded_model(product: pytest.Pytester) -> None:
    product.makepyfile(
        test_product="""
        import pytest, product

        pytestmark = pytest.mark.slm

        def test_ask(slm_model):
            answer = product.ask("Say hello")
            assert answer
            (call,) = slm_model.calls
            assert call.text == answer
            assert call.request["model"] == "gpt-4o"
            assert call.model == "smollm2-135m"
            assert call.endpoint.startswith("http://127.0.0.1:")
            assert call.completion_tokens and call.ttft_ms > 0 and call.e2e_ms >= call.ttft_ms
        """
    )
    result = product.runpytest("--slm-models=smollm2-135m")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*pytest-slam*", "smollm2-135m * 1/1 *"])


def test_every_sdk_entry_point_is_swapped(product: pytest.Pytester, smollm2_endpoint: str) -> None:
    product.makepyfile(
        test_entry_points="""
        import asyncio, os
        import openai
        import pytest

        pytestmark = pytest.mark.slm
        MSG = [{"role": "user", "content": "Say hi"}]

        def test_explicit_key_from_env(slm_model):
            client = openai.OpenAI(api_key=os.environ["OPENAI_API_KEY"])
            client.chat.completions.create(model="gpt-4", messages=MSG, max_tokens=4)
            assert len(slm_model.calls) == 1

        def test_module_level_api(slm_model):
            r = openai.chat.completions.create(model="gpt-4o", messages=MSG, max_tokens=4)
            assert r.choices[0].message.content == slm_model.calls[0].text

        def test_async_client(slm_model):
            async def go():
                client = openai.AsyncOpenAI()
                return await client.chat.completions.create(model="gpt-4o", messages=MSG, max_tokens=4)
            r = asyncio.run(go())
            assert r.choices[0].message.content == slm_model.calls[0].text

        def test_streaming(slm_model):
            stream = openai.OpenAI().chat.completions.create(
                model="gpt-4o", messages=MSG, max_tokens=6, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            (call,) = slm_model.calls
            assert call.streamed and call.text == text and call.ttft_ms <= call.e2e_ms

        def test_no_usage_chunk_unless_asked(slm_model):
            stream = openai.OpenAI().chat.completions.create(
                model="gpt-4o", messages=MSG, max_tokens=4, stream=True)
            assert all(chunk.choices for chunk in stream)

        def test_fixture_chat(slm_model):
            call = slm_model.chat("Say hi", max_tokens=4)
            assert call.text and call.prompt_tokens > 0
        """
    )
    result = product.runpytest(f"--slm-models={smollm2_endpoint}", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_explicit_key_from_env?SmolLM2-135M-Instruct? PASSED*"])


def test_calls_outside_opted_in_tests_are_not_swapped(
    product: pytest.Pytester, smollm2_endpoint: str, fake_gpt4
) -> None:
    product.makepyfile(
        test_mixed=f"""
        import openai, pytest

        def test_plain():
            client = openai.OpenAI(base_url="{fake_gpt4.base_url}", api_key="sk-x")
            r = client.chat.completions.create(model="gpt-4", messages=[{{"role": "user", "content": "q"}}])
            assert r.choices[0].message.content == "GPT-4 says: q"

        @pytest.mark.slm
        def test_swapped(slm_model):
            assert slm_model.name == "SmolLM2-135M-Instruct"
        """
    )
    result = product.runpytest(f"--slm-models={smollm2_endpoint}", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*test_plain PASSED*", "*test_swapped?SmolLM2-135M-Instruct? PASSED*"]
    )


def test_calls_are_spread_over_a_models_replicas(product: pytest.Pytester) -> None:
    from pytest_slam.testing import FakeOpenAI

    with FakeOpenAI(answer="from a") as a, FakeOpenAI(answer="from b") as b:
        product.makefile(
            ".toml",
            pyproject=f"""
[tool.slam]
reference = "none"
candidates = ["fleet"]
[tool.slam.models.fleet]
model = "Qwen/Qwen2.5-7B-Instruct"
base_urls = ["{a.base_url}", "{b.base_url}"]
""",
        )
        product.makepyfile(
            test_fleet="""
            import pytest, product

            @pytest.mark.slm
            @pytest.mark.parametrize("n", range(6))
            def test_ask(n):
                assert product.ask(f"question {n}") in ("from a", "from b")
            """
        )
        result = product.runpytest()
        result.assert_outcomes(passed=6)
        assert (a.hits, b.hits) == (3, 3)
        assert {r.json["model"] for r in a.requests + b.requests} == {"Qwen/Qwen2.5-7B-Instruct"}
