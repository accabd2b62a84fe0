"""OpenAI-compatible servers the run does not start: any endpoint by URL, and Ollama.

``[tool.slam.models.NAME] base_url = "http://HOST:PORT/v1"`` (``provider = "endpoint"``, the
default) or ``provider = "ollama"``; inline ``http://HOST:PORT/v1#MODEL_ID`` or ``ollama:NAME``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pytest_slam.records import JSON, ModelSpec
from pytest_slam.swap.engines.protocol import ModelSpecError
from pytest_slam.swap.engines.providers import BaseProvider

OLLAMA_URL = "http://127.0.0.1:11434/v1"


class Endpoint(BaseProvider):
    """A running server named by its URL; a tokenizer it offers (llama.cpp, vLLM) is asked once."""

    name = "endpoint"
    tokenizer = "probe"
    inline_form = "http://HOST:PORT/v1#MODEL_ID"

    def check_table(self, name: str, data: Mapping[str, JSON]) -> None:
        self.require_url(name, data)

    def inline(self, text: str, rest: str) -> ModelSpec:
        url, sep, model_id = text.partition("#")
        if not sep or not model_id or not re.match(r"https?://[^/\s]+", url):
            raise ModelSpecError(
                f"{text!r}: an endpoint spec is http://HOST:PORT/v1#MODEL_ID (the model id after '#')."
            )
        return ModelSpec(
            name=model_id,
            provider=self.name,
            model_id=model_id,
            base_urls=[url.rstrip("/")],
            source="inline",
        )


class Ollama(BaseProvider):
    """Ollama's OpenAI-compatible API, at ``OLLAMA_HOST`` or its default port."""

    name = "ollama"
    inline_form = "ollama:NAME"

    def default_urls(self) -> list[str]:
        host = os.environ.get("OLLAMA_HOST", "").rstrip("/")
        return [f"{host}/v1" if host.startswith("http") else OLLAMA_URL]

    def check_table(self, name: str, data: Mapping[str, JSON]) -> None:
        self.require_url(name, data)

    def inline(self, text: str, rest: str) -> ModelSpec:
        urls = self.default_urls()
        return ModelSpec(
            name=text, provider=self.name, model_id=rest, base_urls=urls, source="inline"
        )
