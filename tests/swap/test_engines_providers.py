"""What a provider says is what the run does: starting, metering, energy and requests ask it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ext_dist import make_dist

from pytest_slam.metrics.metering import gpu_served
from pytest_slam.swap.engines import ManagedProvider, Provider, needs_engine, registry
from pytest_slam.swap.models import PROVIDERS, ModelSpecError, from_table, resolve
from pytest_slam.swap.request import upstream_body

GPU_BOX = '''
from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines import ManagedProvider
from pytest_slam.swap.engines.vllm import VllmEngine


class GpuBox(ManagedProvider):
    """A vLLM-like server under another name: GPU-served, one answer per call, its own defaults."""

    name = "gpu-box"
    engine = VllmEngine
    gpu = True
    tokenizer = "vllm"
    serves_n = False
    cap_field = "max_new_tokens"

    def request_defaults(self, spec):
        return {"priority": int(spec.engine_args.get("priority", 0))}

    def inline(self, text, rest):
        provider = text.partition(":")[0]  # the name it was installed under
        return ModelSpec(name=text, provider=provider, model_id=rest, source="inline")
'''


@pytest.fixture
def gpu_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An installed distribution declaring ``gpu-box-<test>`` under ``pytest_slam.engines``."""
    name = f"gpu-box-{tmp_path.name}"
    site = make_dist(
        tmp_path / "site",
        "gpu-box",
        {"gpu_box/__init__.py": "", "gpu_box/engine.py": GPU_BOX},
        {registry.GROUP: {name: "gpu_box.engine:GpuBox"}},
    )
    monkeypatch.syspath_prepend(str(site))
    return name


def test_every_builtin_is_a_provider_found_by_its_name() -> None:
    """Each entry of the registry (``BUILTINS``), read from it: a new built-in is checked here
    without an edit. The specs the docs name resolve to the providers they say."""
    assert tuple(registry.BUILTINS) == PROVIDERS
    assert {"llamacpp", "vllm", "ollama", "openai", "endpoint", "curated"} <= set(PROVIDERS)
    for name in PROVIDERS:
        provider = registry.find(name)
        assert isinstance(provider, Provider) and provider.name == name
        assert provider.managed == isinstance(provider, ManagedProvider), name
    managed = {name for name in PROVIDERS if registry.find(name).managed}
    assert {"llamacpp", "vllm"} <= managed and not {"ollama", "openai", "endpoint"} & managed


def test_a_managed_model_needs_its_engine_only_until_it_has_a_url() -> None:
    spec = resolve("vllm:Qwen/Qwen2.5-0.5B-Instruct")
    assert needs_engine(spec)
    spec.base_urls = ["http://127.0.0.1:8000/v1"]
    assert not needs_engine(spec)
    assert not needs_engine(resolve("openai:gpt-4o-mini"))


def test_an_installed_provider_decides_starting_energy_and_requests(gpu_box: str) -> None:
    spec = from_table("box", {"provider": gpu_box, "engine": {"priority": 3}})
    assert needs_engine(spec) and gpu_served(spec)
    assert not gpu_served(from_table("cool", {"provider": gpu_box, "engine": {"gpu": False}}))
    body = upstream_body({"model": "gpt-4", "messages": []}, spec, cap=64)
    assert (body["max_new_tokens"], body["priority"], "max_tokens" in body) == (64, 3, False)


def test_builtin_requests_are_unchanged() -> None:
    """OpenAI's models take max_completion_tokens; llama.cpp gets no prompt cache by default."""
    hosted = upstream_body({"model": "gpt-4"}, resolve("openai:o3-mini"), cap=10)
    assert hosted["max_completion_tokens"] == 10 and "cache_prompt" not in hosted
    local = upstream_body({"model": "gpt-4"}, resolve("llamacpp:/m/q.gguf"), cap=10)
    assert (local["max_tokens"], local["cache_prompt"]) == (10, False)


def test_an_inline_spec_of_an_installed_provider(gpu_box: str) -> None:
    spec = resolve(f"{gpu_box}:org/model")
    assert (spec.provider, spec.model_id, needs_engine(spec)) == (gpu_box, "org/model", True)
    with pytest.raises(ModelSpecError, match="unknown model 'no-such-box:org/model'"):
        resolve("no-such-box:org/model")
