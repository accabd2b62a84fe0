"""Engine providers: each kind of model server in a module of its own, found by name.

``protocol.Provider`` says what a provider must tell the run (whether it needs starting, how it
starts and stops, its URLs and key, how its tokens are counted, whether it is GPU-served, its
table's rules, its cost model); ``base`` has the defaults; ``managed`` runs a started engine under
``supervise``; ``registry`` finds a provider by name, entry point (group ``pytest_slam.engines``)
or import path. Built-ins: ``llamacpp``, ``vllm``, ``ollama``, ``openai``, ``endpoint``, ``curated``.
"""

from __future__ import annotations

from pytest_slam.swap.engines.llamacpp import (
    KV_TOKENS_PER_FILE,
    LlamaCppEngine,
    resolve_model_path,
    slots_that_fit,
)
from pytest_slam.swap.engines.managed import Engine, ManagedServer, free_port, log_tail
from pytest_slam.swap.engines.protocol import EngineError, ModelSpecError, Provider, Running, Say
from pytest_slam.swap.engines.providers import BaseProvider, ManagedProvider
from pytest_slam.swap.engines.registry import (
    GROUP,
    UnknownProvider,
    find,
    needs_engine,
    provider_of,
    start_engine,
)
from pytest_slam.swap.engines.vllm import VllmEngine

__all__ = [
    "GROUP",
    "KV_TOKENS_PER_FILE",
    "BaseProvider",
    "Engine",
    "EngineError",
    "LlamaCppEngine",
    "ManagedProvider",
    "ManagedServer",
    "ModelSpecError",
    "Provider",
    "Running",
    "Say",
    "UnknownProvider",
    "VllmEngine",
    "find",
    "free_port",
    "log_tail",
    "needs_engine",
    "provider_of",
    "resolve_model_path",
    "slots_that_fit",
    "start_engine",
]
