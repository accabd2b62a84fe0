"""Model specs: names, inline specs and [tool.slam.models] tables resolve, or fail saying what is known."""

from __future__ import annotations

import pytest

from pytest_slam.swap.engines import needs_engine
from pytest_slam.swap.models import (
    DEFAULT_MODEL,
    ModelSpecError,
    from_table,
    parse_models_option,
    resolve,
    resolve_all,
)


def test_builtin_default_is_the_embedded_llamacpp_model() -> None:
    spec = resolve(DEFAULT_MODEL)
    assert (spec.provider, spec.model_id, needs_engine(spec)) == (
        "llamacpp",
        "SmolLM2-135M-Instruct",
        True,
    )


@pytest.mark.parametrize(
    ("text", "provider", "model_id", "urls"),
    [
        ("llamacpp:/models/qwen.gguf", "llamacpp", "qwen", []),
        ("vllm:Qwen/Qwen2.5-1.5B-Instruct", "vllm", "Qwen/Qwen2.5-1.5B-Instruct", []),
        ("ollama:llama3.2", "ollama", "llama3.2", ["http://127.0.0.1:11434/v1"]),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", ["https://api.openai.com/v1"]),
        ("http://10.0.0.5:8000/v1#mistral", "endpoint", "mistral", ["http://10.0.0.5:8000/v1"]),
    ],
)
def test_inline_specs(text: str, provider: str, model_id: str, urls: list[str]) -> None:
    spec = resolve(text)
    assert (spec.provider, spec.model_id, spec.base_urls) == (provider, model_id, urls)


def test_openai_spec_reads_its_key_from_the_environment_by_name() -> None:
    assert resolve("openai:gpt-4").api_key_env == "OPENAI_API_KEY"


def test_table_model_with_replicas_and_prices() -> None:
    table = {
        "qwen": {
            "provider": "endpoint",
            "model": "Qwen/Qwen2.5-7B",
            "base_urls": ["http://a:8000/v1/", "http://b:8000/v1"],
            "api_key_env": "QWEN_KEY",
            "hourly_usd": 1.2,
        }
    }
    spec = resolve("qwen", table)
    assert spec.base_urls == ["http://a:8000/v1", "http://b:8000/v1"]
    assert (spec.api_key_env, spec.hourly_usd, spec.source) == ("QWEN_KEY", 1.2, "pyproject")


def test_table_overrides_a_builtin_of_the_same_name() -> None:
    table = {DEFAULT_MODEL: {"provider": "endpoint", "base_url": "http://127.0.0.1:9/v1"}}
    assert resolve(DEFAULT_MODEL, table).provider == "endpoint"


def test_unknown_name_lists_known_models_and_inline_forms() -> None:
    with pytest.raises(ModelSpecError) as exc:
        resolve("gpt5-tiny", {"qwen": {"base_url": "http://x/v1"}})
    message = str(exc.value)
    assert "unknown model 'gpt5-tiny'" in message
    assert "qwen" in message and DEFAULT_MODEL in message and "vllm:HF_MODEL_ID" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("llamacpp:model.bin", "names a .gguf file"),
        ("http://127.0.0.1:8000/v1", "the model id after '#'"),
        ("http://127.0.0.1:8000/v1#", "the model id after '#'"),
    ],
)
def test_malformed_inline_specs(text: str, fragment: str) -> None:
    with pytest.raises(ModelSpecError, match=fragment):
        resolve(text)


def test_table_with_unknown_key_or_provider_is_rejected() -> None:
    with pytest.raises(ModelSpecError, match="unknown keys \\['basurl'\\]"):
        from_table("m", {"basurl": "http://x/v1"})
    with pytest.raises(ModelSpecError, match="provider='tgi'"):
        from_table("m", {"provider": "tgi", "base_url": "http://x/v1"})
    with pytest.raises(ModelSpecError, match="needs base_url"):
        from_table("m", {"provider": "endpoint"})


def test_a_misspelt_table_key_names_the_nearest_known_one() -> None:
    with pytest.raises(ModelSpecError, match="did you mean 'base_url'\\? known keys: api_key_env"):
        from_table("m", {"basurl": "http://x/v1"})
    with pytest.raises(
        ModelSpecError, match=r"\[tool\.slam\.models\.q\.engine\] .* 'max_model_len'"
    ):
        from_table("q", {"provider": "vllm", "engine": {"max_model_length": 2048}})


def test_table_timeout_reaches_the_spec() -> None:
    spec = from_table("m", {"base_url": "http://x/v1", "timeout_s": 30})
    assert (spec.timeout_s, resolve(DEFAULT_MODEL).timeout_s) == (30, None)


def test_models_option_parsing() -> None:
    assert parse_models_option(" a, b ,c") == ["a", "b", "c"]
    with pytest.raises(ModelSpecError, match="empty entry"):
        parse_models_option("a,,b")


def test_the_same_model_twice_is_an_error() -> None:
    with pytest.raises(ModelSpecError, match="selected twice"):
        resolve_all([DEFAULT_MODEL, DEFAULT_MODEL])


def test_the_openai_key_goes_only_to_openai_unless_a_table_names_it() -> None:
    """The user sent OPENAI_API_KEY to OpenAI: another host gets it only through ``api_key_env``."""
    assert from_table("o", {"provider": "openai"}).api_key_env == "OPENAI_API_KEY"
    gateway = {"provider": "openai", "base_url": "http://gpu-box:8000/v1"}
    assert from_table("g", gateway).api_key_env is None
    named = {**gateway, "api_key_env": "OPENAI_API_KEY"}
    assert from_table("g", named).api_key_env == "OPENAI_API_KEY"


def test_a_short_table_of_a_builtins_name_tunes_it_in_one_line() -> None:
    """``[tool.slam.models.smollm2-135m] max_tokens_cap = 4096``: the embedded model, one setting
    changed; a key that says where the model is makes the table a model of its own (above)."""
    builtin = resolve("smollm2-135m")
    tuned = resolve("smollm2-135m", {"smollm2-135m": {"max_tokens_cap": 4096, "timeout_s": 30}})
    assert (tuned.max_tokens_cap, tuned.timeout_s, tuned.source) == (4096, 30, "pyproject")
    assert (tuned.provider, tuned.engine_args) == (builtin.provider, builtin.engine_args)
    assert builtin.max_tokens_cap == 1024
    with pytest.raises(ModelSpecError, match="unknown keys"):
        resolve("smollm2-135m", {"smollm2-135m": {"max_token_cap": 4096}})
