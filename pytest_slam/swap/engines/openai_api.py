"""OpenAI's hosted API (or a gateway named with ``provider = "openai"`` and a base_url).

Inline ``openai:MODEL``. Its models take ``max_completion_tokens`` (the o-series refuse
``max_tokens``); tokens it did not report are counted with tiktoken.
"""

from __future__ import annotations

from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines.providers import BaseProvider

OPENAI_URL = "https://api.openai.com/v1"
OPENAI_KEY_ENV = "OPENAI_API_KEY"


class OpenAI(BaseProvider):
    name = "openai"
    cap_field = "max_completion_tokens"
    inline_form = "openai:MODEL"

    def default_urls(self) -> list[str]:
        return [OPENAI_URL]

    def key_env(self, urls: list[str]) -> str | None:
        """OPENAI_API_KEY for OpenAI's own endpoint only: the user sent that key to OpenAI, so a
        gateway or a self-hosted server named with ``provider = "openai"`` gets it only by
        ``api_key_env``."""
        return OPENAI_KEY_ENV if all(u.rstrip("/") == OPENAI_URL for u in urls) else None

    def inline(self, text: str, rest: str) -> ModelSpec:
        return ModelSpec(
            name=text,
            provider=self.name,
            model_id=rest,
            base_urls=self.default_urls(),
            api_key_env=OPENAI_KEY_ENV,
            source="inline",
        )
