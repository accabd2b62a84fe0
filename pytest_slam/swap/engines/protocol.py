"""What an engine provider must say: the one place a kind of model server is described.

A provider is the ``provider`` a user writes in ``[tool.slam.models.NAME]`` (or the prefix of an
inline spec, ``vllm:MODEL``): whether the run starts its server, how it starts and stops, where it
serves by default, which key it reads, how tokens it did not report are counted, whether its calls
are GPU-served (energy), how its table is checked and how its calls are priced. Everything else in
pytest-slam asks the provider (``registry.provider_of``) instead of comparing provider strings, so a
new kind of engine is one module (as pytest-xdist's schedulers are: a protocol, one module each).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, ModelSpec

Say = Callable[[str], None]  # where progress lines go (run/start/progress.py), one line per call
# How the tokens of a call whose server reported no usage are counted: with the engine's own
# ``/tokenize`` (its dialect, metrics.tokens.SERVERS), by asking the endpoint once which tokenizer
# it offers (``probe``), or by tiktoken / the heuristic (``estimate``).
Tokenizer = Literal["llamacpp", "vllm", "probe", "estimate"]
# How a call is priced: the machine's hourly price times its busy time, tokens times a price, none.
CostModel = Literal["hourly", "tokens", "none"]


class ModelSpecError(ValueError, SlamError, kind="model"):
    """A model name or spec that cannot be resolved; the message lists what is known."""


class EngineError(RuntimeError, SlamError, kind="engine"):
    """An engine could not start or is unusable here; the message says why and what to do."""


@runtime_checkable
class Running(Protocol):
    """A started engine: where it serves, one line about it, and how to stop it (always called)."""

    started_s: float | None  # seconds its start took

    @property
    def base_url(self) -> str: ...

    def start_line(self) -> str: ...

    def stop(self) -> None: ...


@runtime_checkable
class Provider(Protocol):
    """One kind of model server (``engines.base.BaseProvider`` has the defaults of an endpoint)."""

    # What it says of itself: read-only (a class attribute in a provider is enough).
    @property
    def name(self) -> str:
        """The name users write: ``provider = "NAME"``."""

    @property
    def managed(self) -> bool:
        """The run starts its server (``start``) unless the spec names its URLs."""

    @property
    def gpu(self) -> bool:
        """Served on this machine's GPU unless its engine table says ``gpu``: energy metered."""

    @property
    def served(self) -> bool:
        """A server answers it (False: answers written by hand, never asked)."""

    @property
    def tokenizer(self) -> Tokenizer:
        """How tokens its server did not report are counted."""

    @property
    def serves_n(self) -> bool:
        """Answers ``n`` > 1 in one call (else the swap makes n calls and merges them)."""

    @property
    def cap_field(self) -> str:
        """The request key that carries the output limit pytest-slam sets."""

    @property
    def inline_form(self) -> str | None:
        """How an inline spec of this kind is written (``vllm:HF_MODEL_ID``), for messages."""

    def default_urls(self) -> list[str]:
        """Where it serves when the spec names no URL (empty: a managed engine sets it at start)."""
        ...

    def key_env(self, urls: list[str]) -> str | None:
        """The environment variable holding its API key when the table names none."""
        ...

    def check_table(self, name: str, data: Mapping[str, JSON]) -> None:
        """The rules of its ``[tool.slam.models.NAME]`` table; ModelSpecError names the fix."""
        ...

    def inline(self, text: str, rest: str) -> ModelSpec | None:
        """``text`` (``NAME:rest``) as a spec; None when it has no inline form."""
        ...

    def request_defaults(self, spec: ModelSpec) -> dict[str, JSON]:
        """Request keys this server needs unless the product set them."""
        ...

    def cost_model(self, spec: ModelSpec) -> CostModel: ...

    def start(
        self,
        spec: ModelSpec,
        log_dir: Path,
        timeout_s: float,
        slots: int = 1,
        say: Say | None = None,
        beat_s: float = 0.0,
    ) -> Running:
        """Start its server and wait until it is healthy (``managed`` providers); EngineError."""
        ...
