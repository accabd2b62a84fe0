"""``slam config check``: beyond the table's types, what a run of it would need, one line each.

A table can be well typed and still stop the run at its first test: a llama.cpp model whose GGUF
file is not there, a managed engine whose package is not installed, a ``base_url`` that is not an
http(s) URL with a host. Each model the run would use (the candidates, else the embedded default,
every ``[tool.slam.models]`` table, the reference, the judge, the embeddings model) is resolved as
the run resolves it and checked as its engine checks itself before starting; nothing is started
and nothing is called.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pytest_slam.errors import SlamError
from pytest_slam.records import ModelSpec
from pytest_slam.settings import Settings


def models_of(settings: Settings) -> list[str]:
    """Every model name a run of ``settings`` would resolve, each once, in a stable order."""
    from pytest_slam.swap.models import DEFAULT_MODEL

    names = [*(settings.models or [DEFAULT_MODEL]), *settings.model_table]
    if settings.has_reference:
        names.append(settings.reference)
    names += [n for n in (settings.judge, settings.embeddings) if n]
    return list(dict.fromkeys(names))


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a model's base URL (None: it can)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:
        return f"{exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL with a host"
    return None


def spec_problems(spec: ModelSpec) -> list[str]:
    """What would stop the run at this model: its URLs, and its managed engine's own check."""
    from pytest_slam.swap.engines.providers import ManagedProvider
    from pytest_slam.swap.engines.registry import provider_of

    found = [
        f"model {spec.name!r}: base_url {url!r}: {why}; write it as http://HOST:PORT/v1"
        for url in spec.base_urls
        if (why := url_problem(url))
    ]
    provider = provider_of(spec)
    if isinstance(provider, ManagedProvider):
        try:
            provider.engine(spec, 0).check_available()
        except SlamError as exc:
            found.append(str(exc).rstrip("."))
    return found


def problems(settings: Settings) -> list[str]:
    """One line per thing a run of these settings would stop on; empty when it has what it needs."""
    from pytest_slam.swap.models import resolve

    found: list[str] = []
    for name in models_of(settings):
        try:
            spec = resolve(name, settings.model_table)
        except SlamError as exc:
            found.append(str(exc).rstrip("."))
            continue
        found.extend(spec_problems(spec))
    return list(dict.fromkeys(found))
