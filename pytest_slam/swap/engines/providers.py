"""The defaults a provider inherits: an OpenAI-compatible server the run does not start
(``BaseProvider``), or one it starts as a supervised process (``ManagedProvider``).

A third-party engine subclasses one of them and overrides what differs; nothing here is required
(the protocol is ``engines.protocol.Provider``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from pytest_slam.records import JSON, ModelSpec
from pytest_slam.swap.engines.managed import Engine, ManagedServer, free_port
from pytest_slam.swap.engines.protocol import (
    CostModel,
    EngineError,
    ModelSpecError,
    Running,
    Say,
    Tokenizer,
)


class BaseProvider:
    """An OpenAI-compatible server that is already running: nothing to start, usage as reported."""

    name: str = ""
    managed: bool = False
    gpu: bool = False
    served: bool = True
    tokenizer: Tokenizer = "estimate"
    serves_n: bool = True
    cap_field: str = "max_tokens"
    inline_form: str | None = None

    def default_urls(self) -> list[str]:
        return []

    def key_env(self, urls: list[str]) -> str | None:
        return None

    def check_table(self, name: str, data: Mapping[str, JSON]) -> None:
        return None

    def inline(self, text: str, rest: str) -> ModelSpec | None:
        return None

    def request_defaults(self, spec: ModelSpec) -> dict[str, JSON]:
        return {}

    def cost_model(self, spec: ModelSpec) -> CostModel:
        """Busy time at the machine's hourly price where the spec sets one, else tokens."""
        return "hourly" if spec.hourly_usd is not None else "tokens"

    def start(
        self,
        spec: ModelSpec,
        log_dir: Path,
        timeout_s: float,
        slots: int = 1,
        say: Say | None = None,
        beat_s: float = 0.0,
    ) -> Running:
        raise EngineError(f"model {spec.name!r} ({spec.provider}) has no managed engine.")

    @staticmethod
    def require_url(name: str, data: Mapping[str, JSON]) -> None:
        """A table of a server the run cannot start must say where it is."""
        if not (data.get("base_urls") or data.get("base_url")):
            raise ModelSpecError(f"[tool.slam.models.{name}] needs base_url (or base_urls).")


class ManagedProvider(BaseProvider):
    """A server the run starts on loopback (``engine``: its process) and stops at the end."""

    managed = True
    engine: ClassVar[type[Engine]]

    def start(
        self,
        spec: ModelSpec,
        log_dir: Path,
        timeout_s: float,
        slots: int = 1,
        say: Say | None = None,
        beat_s: float = 0.0,
    ) -> Running:
        server = ManagedServer(self.engine(spec, free_port(), slots), log_dir)
        server.start(timeout_s, say, beat_s)
        return server
