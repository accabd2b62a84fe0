"""Keep credentials out of committed golden files and written reports.

``canonical_request`` never holds headers, but a key can still arrive inside a body (a prompt that
quotes a config file, a vendor field such as ``api_key``). ``scrub`` runs on everything written.
What counts as a secret (a heuristic; it errs towards redacting, but leaves prose alone):
- an OpenAI-style key: ``sk-`` at the start of a word followed by 3 or more key characters that
  include a digit (``sk-abc123``, ``sk-proj-...``, ``sk-svcacct-...``, ``sk-admin-...``); ``sk-proj-``,
  ``sk-svcacct-`` and ``sk-admin-`` followed by 8 or more characters even without one. ``risk-free``
  and ``task-42`` are words, not keys (no word start before ``sk-``); ``sk-learn`` has no digit;
- a bearer token: ``Bearer`` and a token with a digit, a symbol (``._~+/=-``) or mixed case, or any
  word that ends the text, line or quoted value (``"Bearer xxx"``); ``the Bearer of bad news`` stays;
- the credentials after ``Authorization:`` / ``Proxy-Authorization:`` (``=`` too, any case);
- the value of any environment variable named ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET`` or
  ``*_SHARD_KEY`` (the key that signs report shards), of 6 or more characters, so a
  placeholder like ``x`` in CI does not blank every ``x``;
- any value under a mapping key such as ``api_key`` or ``authorization``.
A secret inside a longer text is replaced in place, so an answer that quotes a key keeps its words.

A recording run uses the reference's answer as its golden file keeps it (``scrub_answer``): the
text it scores, compares and shows in a failure message is the one a replay reads, so a key never
reaches a junit file or a CI log and both runs give the same score.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from pytest_slam.records import JSON, GoldenAnswer

REDACTED = "[redacted]"
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_SHARD_KEY")  # SLAM_SHARD_KEY signs
SECRET_FIELD_NAMES = frozenset({"api_key", "api-key", "x-api-key", "authorization", "apikey"})
MIN_ENV_SECRET_LENGTH = 6
KEY_ENV_NAMES: set[str] = set()  # variables model specs read their keys from, whatever their name
_KEY_CHARS = r"[A-Za-z0-9_\-]"
_OPENAI_KEYS = (
    re.compile(rf"\bsk-(?:proj|svcacct|admin)-{_KEY_CHARS}{{8,}}"),
    re.compile(rf"\bsk-{_KEY_CHARS}*[0-9]{_KEY_CHARS}*"),
)
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"((?:(?:bearer|basic|token|digest|bot)\s+)?[^\s\"',;]+)"
)
_BEARER = re.compile(r"\b([Bb]earer|BEARER)(\s+)([A-Za-z0-9._~+/\-]+=*)")
_VALUE_END = re.compile(r"\s*(?:$|[\"'`,;)\]}>\r\n])")
_MIN_OPENAI_KEY_TAIL = 3  # ``sk-`` and at least this many characters


def secret_env(*names: str | None) -> None:
    """Treat these environment variables' values as secrets too: a model spec's ``api_key_env``
    holds a key even when its name has none of ``SECRET_ENV_SUFFIXES``."""
    KEY_ENV_NAMES.update(name for name in names if name)


def _env_secrets() -> list[str]:
    values = {
        v
        for k, v in os.environ.items()
        if (k.upper().endswith(SECRET_ENV_SUFFIXES) or k in KEY_ENV_NAMES)
        and len(v) >= MIN_ENV_SECRET_LENGTH
    }
    return sorted(values, key=len, reverse=True)  # longest first: a key containing another


def _openai_key(match: re.Match[str]) -> str:
    return REDACTED if len(match.group(0)) >= 3 + _MIN_OPENAI_KEY_TAIL else match.group(0)


def _is_token(token: str, ends_value: bool) -> bool:
    """A bearer credential, not the next word of a sentence (``Bearer of``, ``Bearer bonds are``)."""
    if len(token) < 3:
        return False
    if not token.isalpha():
        return True  # a digit or a token symbol
    one_word = token.islower() or token.isupper() or token[1:].islower()
    return ends_value or not one_word


def _bearer(match: re.Match[str]) -> str:
    token = match.group(3)
    ends = _VALUE_END.match(match.string, match.end()) is not None
    return (
        f"{match.group(1)}{match.group(2)}{REDACTED}" if _is_token(token, ends) else match.group(0)
    )


def scrub_text(text: str, env_secrets: list[str] | None = None) -> str:
    """The text with every key-shaped token and every secret env value replaced."""
    for secret in _env_secrets() if env_secrets is None else env_secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "sk-" in text:
        for pattern in _OPENAI_KEYS:
            text = pattern.sub(_openai_key, text)
    lowered = text.lower()
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    if "bearer" in lowered:
        text = _BEARER.sub(_bearer, text)
    return text


def scrub(obj: JSON, env_secrets: list[str] | None = None) -> JSON:
    """The JSON-shaped object with secrets replaced by ``[redacted]``: a copy, or the object itself
    when nothing in it can be one (callers serialize the result; none changes it)."""
    secrets = _env_secrets() if env_secrets is None else env_secrets
    if not _may_hold_secret(obj, secrets):
        return obj
    return _scrub(obj, secrets)


def _may_hold_secret(obj: JSON, secrets: list[str]) -> bool:
    """Whether the walk of ``_scrub`` could change anything, from one serialization of ``obj``.

    A report of a thousand tests is tens of thousands of strings, each walked and searched in
    Python; its JSON text is searched in C in a fraction of that. Every test here finds at least
    what the walk would change: a key pattern starts with ``sk-``, the header and bearer patterns
    need their words (any case), a secret field its quoted name, and an environment secret itself
    (JSON text escapes no character a key is made of; a secret with one that it escapes is looked
    for by the walk).
    """
    try:
        text = json.dumps(obj, ensure_ascii=False)
    except (TypeError, ValueError):  # not plain JSON (a tuple key, NaN): the walk decides
        return True
    if "sk-" in text:
        return True
    lowered = text.lower()
    if "authorization" in lowered or "bearer" in lowered:
        return True
    if any(f'"{name}"' in lowered for name in SECRET_FIELD_NAMES):
        return True
    return any(secret in text or json.dumps(secret)[1:-1] != secret for secret in secrets)


def _scrub(obj: JSON, secrets: list[str]) -> JSON:
    kind = type(obj)
    if kind is int or kind is float or kind is bool or obj is None:
        return obj  # the common leaves first: no ABC check for each number
    if isinstance(obj, str):
        return scrub_text(obj, secrets)
    if isinstance(obj, Mapping):
        return {
            k: REDACTED
            if str(k).lower() in SECRET_FIELD_NAMES and isinstance(v, str) and v
            else _scrub(v, secrets)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [_scrub(v, secrets) for v in obj]
    return obj


def scrub_answer(answer: GoldenAnswer) -> GoldenAnswer:
    """The answer as its golden file keeps it, secrets replaced; ``answer`` itself if it holds none."""
    plain: JSON = answer.as_dict()
    clean = scrub(plain)
    return (
        answer if clean is plain or not isinstance(clean, dict) else GoldenAnswer.from_dict(clean)
    )
