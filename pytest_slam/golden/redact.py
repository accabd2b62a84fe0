"""Keep credentials out of committed golden files.

``canonical_request`` never holds headers, but a key can still arrive inside a body (a prompt that
quotes a config file, a vendor field such as ``api_key``). ``scrub`` runs on everything written.
What counts as a secret (a heuristic; it errs towards redacting):
- ``sk-`` followed by 20 or more key characters that include a digit (OpenAI-style keys);
- ``Bearer`` followed by a token of 16 or more characters that includes a digit;
- the value of any environment variable named ``*_API_KEY``, ``*_TOKEN`` or ``*_SECRET`` (6 or more
  characters, so a placeholder like ``x`` in CI does not blank every ``x``);
- any value under a mapping key such as ``api_key`` or ``authorization``.
A secret inside a longer text is replaced in place, so an answer that quotes a key keeps its words.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
SECRET_FIELD_NAMES = frozenset({"api_key", "api-key", "x-api-key", "authorization", "apikey"})
MIN_ENV_SECRET_LENGTH = 6
_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bBearer\s+[A-Za-z0-9._~+/\-]{16,}=*"),
)


def _env_secrets() -> list[str]:
    values = {
        v
        for k, v in os.environ.items()
        if k.upper().endswith(SECRET_ENV_SUFFIXES) and len(v) >= MIN_ENV_SECRET_LENGTH
    }
    return sorted(values, key=len, reverse=True)  # longest first: a key containing another


def _redact_match(match: re.Match[str]) -> str:
    text = match.group(0)
    return REDACTED if any(c.isdigit() for c in text) else text


def scrub_text(text: str, env_secrets: list[str] | None = None) -> str:
    """The text with every key-shaped token and every secret env value replaced."""
    for secret in _env_secrets() if env_secrets is None else env_secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(_redact_match, text)
    return text


def scrub(obj: Any, env_secrets: list[str] | None = None) -> Any:
    """A copy of a JSON-shaped object with secrets replaced by ``[redacted]``."""
    secrets = _env_secrets() if env_secrets is None else env_secrets
    if isinstance(obj, str):
        return scrub_text(obj, secrets)
    if isinstance(obj, Mapping):
        return {
            k: REDACTED
            if str(k).lower() in SECRET_FIELD_NAMES and isinstance(v, str) and v
            else scrub(v, secrets)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [scrub(v, secrets) for v in obj]
    return obj
