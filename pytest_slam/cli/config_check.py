"""``slam config check``: beyond the table's types, what a run of it would need, one line each.

A table can be well typed and still stop the run at its first test: a llama.cpp model whose GGUF
file is not there, a managed engine whose package is not installed, a ``base_url`` that is not an
http(s) URL with a host. Each model the run would use (the candidates, else the embedded default,
every ``[tool.slam.models]`` table, the reference, the judge, the embeddings model) is resolved as
the run resolves it and checked as its engine checks itself before starting; nothing is started
and nothing is called.

Every problem is found in one run, not one per run: a run of pytest stops on the table's first
bad section, but here each key, each section's key and each model table is checked on its own
(``table_problems``), then what is left whole is resolved; a model whose own table is bad, or the
candidates when their key is bad, are not resolved, and the last line says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pytest_slam.errors import SlamError
from pytest_slam.records import ModelSpec
from pytest_slam.settings import TOML, Settings

# Sections whose reader stops at its first bad key (report.gate, metrics.metering): their keys are
# checked one at a time, so that each bad one is named.
ONE_BY_ONE = ("gate", "baseline", "prices", "budget")
NAMES_KEYS = ("candidates", "reference", "judge", "embeddings")  # keys that name models


@dataclass
class Checked:
    """What the table's checks found, and the settings of the rest (None: they do not hold)."""

    lines: list[str] = field(default_factory=list)
    settings: Settings | None = None
    bad_keys: set[str] = field(default_factory=set)  # [tool.slam] keys left out of ``settings``
    bad_models: list[str] = field(default_factory=list)  # [tool.slam.models.NAME] left out


def _errors(data: Mapping[str, TOML]) -> list[str]:
    """The lines ``data``, a part of the table, gives on its own; empty when it holds."""
    from pydantic import ValidationError

    from pytest_slam.config import SlamTable, error_lines

    try:
        SlamTable.model_validate(data)
    except ValidationError as exc:
        return error_lines(exc)
    return []


def _model_errors(name: str, table: TOML) -> list[str]:
    """One model table's lines: its rules (which stop at the first), and its types apart."""
    from pydantic import ValidationError

    from pytest_slam.config import ModelTable, error_lines

    found = _errors({"models": {name: table}})
    if found and isinstance(table, Mapping):
        said = "\n".join(found)  # a key its rule already named is not named twice
        typed = {
            key: value
            for key, value in table.items()
            if key in ModelTable.model_fields and f"] {key}=" not in said
        }
        try:
            ModelTable.model_validate(typed)
        except ValidationError as exc:
            found += error_lines(exc, ("models", name))
    return found


def _section_errors(key: str, value: TOML) -> list[str]:
    found = _errors({key: value})
    if found and key in ONE_BY_ONE and isinstance(value, Mapping) and len(value) > 1:
        apart = [line for sub, item in value.items() for line in _errors({key: {sub: item}})]
        return apart or found  # only the keys together break a rule: its line
    return found


def table_problems(table: Mapping[str, TOML]) -> Checked:
    """Each bad key, section key and model table of ``[tool.slam]`` on its own line, and the
    settings of what is left once they are taken out."""
    from pytest_slam.config import SlamTable

    checked = Checked()
    known = set(SlamTable.model_fields)
    unknown = [key for key in table if key not in known]
    if unknown:  # one line names them all, with their nearest keys
        checked.lines += _errors({key: table[key] for key in unknown})
    rest = {key: value for key, value in table.items() if key in known}
    for key, value in list(rest.items()):
        if key == "models" and isinstance(value, Mapping):
            for name, sub in value.items():
                if found := _model_errors(str(name), sub):
                    checked.lines += found
                    checked.bad_models.append(str(name))
            rest[key] = {n: t for n, t in value.items() if n not in checked.bad_models}
        elif found := _section_errors(key, value):
            checked.lines += found
            checked.bad_keys.add("candidates" if key == "models" else key)
            del rest[key]
    together = _errors(rest)  # what only keys together break
    checked.lines = list(dict.fromkeys([*checked.lines, *together]))
    if not together:
        checked.settings = SlamTable.model_validate(rest).to_settings()
    return checked


def models_of(settings: Settings, left_out: frozenset[str] = frozenset()) -> list[str]:
    """Every model name a run of ``settings`` would resolve, each once, in a stable order;
    ``left_out``: keys naming models whose values were bad (their models are not named)."""
    from pytest_slam.swap.models import DEFAULT_MODEL

    names = [] if "candidates" in left_out else [*(settings.models or [DEFAULT_MODEL])]
    names += settings.model_table
    if settings.has_reference and "reference" not in left_out:
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


def problems(settings: Settings, checked: Checked | None = None) -> list[str]:
    """One line per thing a run of these settings would stop on; empty when it has what it needs.

    With ``checked`` (the table's own problems), a model whose table is bad is not resolved (its
    name would read as unknown), nor are the candidates when their key is bad."""
    from pytest_slam.swap.models import resolve

    found: list[str] = []
    left_out = frozenset(checked.bad_keys) if checked else frozenset()
    bad_models = set(checked.bad_models) if checked else set()
    for name in models_of(settings, left_out):
        if name in bad_models:
            continue
        try:
            spec = resolve(name, settings.model_table)
        except SlamError as exc:
            found.append(str(exc).rstrip("."))
            continue
        found.extend(spec_problems(spec))
    return list(dict.fromkeys(found))


def not_checked(checked: Checked) -> str | None:
    """The line saying what was not resolved because of a bad key or table (None: nothing)."""
    named = [key for key in NAMES_KEYS if key in checked.bad_keys]
    parts = [f"the models named by [tool.slam] {', '.join(named)}"] if named else []
    parts += [f"model {name!r}" for name in checked.bad_models]
    if not parts:
        return None
    return f"not resolved until the lines above are fixed: {', '.join(parts)}"
