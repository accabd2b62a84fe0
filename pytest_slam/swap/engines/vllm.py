"""vLLM as a managed engine: ``vllm serve MODEL`` on a GPU machine, its calls' energy metered.

``[tool.slam.models.NAME] provider = "vllm"``; inline ``vllm:HF_MODEL_ID``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from pytest_slam.records import JSON, ModelSpec
from pytest_slam.swap.engines.managed import Engine
from pytest_slam.swap.engines.protocol import EngineError, ModelSpecError
from pytest_slam.swap.engines.providers import ManagedProvider
from pytest_slam.util.config_keys import unknown_keys_line


class VllmEngine(Engine):
    """``vllm serve MODEL`` on a GPU machine; options map one to one onto vLLM's own flags.

    ``[tool.slam.models.NAME] engine = {dtype = "bfloat16", max_model_len = 4096,
    gpu_memory_utilization = 0.5, tensor_parallel_size = 1, extra_args = ["--enforce-eager"]}``.
    ``executable`` names another ``vllm`` than the one beside this Python or on PATH; ``gpu = false``
    runs a vLLM built for another device without the CUDA check (and without energy metering);
    ``start_timeout_s`` covers a first start's download, load, compile and CUDA graph capture.
    """

    kind = "vLLM"
    START_TIMEOUT_S = 600.0
    FLAGS = {
        "dtype": "--dtype",
        "max_model_len": "--max-model-len",
        "gpu_memory_utilization": "--gpu-memory-utilization",
        "tensor_parallel_size": "--tensor-parallel-size",
        "max_num_seqs": "--max-num-seqs",
        "seed": "--seed",
        "quantization": "--quantization",
        "revision": "--revision",
        "download_dir": "--download-dir",
        "generation_config": "--generation-config",
    }
    SWITCHES = {"enforce_eager": "--enforce-eager", "trust_remote_code": "--trust-remote-code"}
    OWN_KEYS = ("executable", "extra_args", "gpu", "start_timeout_s")

    def check_available(self) -> None:
        self._check_args()
        has_vllm = self.executable() is not None
        has_gpu = not self.spec.engine_args.get("gpu", True) or _has_nvidia_gpu()
        lacks = {
            (False, False): "neither vLLM nor a CUDA GPU",
            (False, True): "no vLLM",
            (True, False): "no CUDA GPU",
        }.get((has_vllm, has_gpu))
        if lacks:
            raise EngineError(
                f"model {self.spec.name!r} is served by vLLM, which needs vLLM and a CUDA GPU; "
                f"this machine has {lacks}. Run it on a GPU machine with "
                "`pip install 'pytest-slam[vllm]'`, or point the model at a running server "
                "with base_url in [tool.slam.models.NAME]."
            )

    def _check_args(self) -> None:
        known = sorted([*self.FLAGS, *self.SWITCHES, *self.OWN_KEYS])
        unknown = sorted(set(self.spec.engine_args) - set(known))
        if unknown:
            raise EngineError(
                f"model {self.spec.name!r}: unknown vLLM engine option(s) {', '.join(unknown)}; "
                f"known: {', '.join(known)} (other `vllm serve` flags go in extra_args)."
            )

    def executable(self) -> str | None:
        """``executable``, else the ``vllm`` installed beside this Python, else one on PATH."""
        given = self.spec.engine_args.get("executable")
        if given:
            return str(given) if os.access(str(given), os.X_OK) else None
        beside = Path(sys.executable).with_name("vllm")
        return str(beside) if os.access(beside, os.X_OK) else shutil.which("vllm")

    def source(self) -> str:
        return (
            f"model {self.spec.model_id} (vLLM fetches it from Hugging Face on a first start, "
            "then reads its cache)"
        )

    def start_timeout(self, timeout_s: float) -> float:
        return float(
            self.spec.engine_args.get("start_timeout_s", max(timeout_s, self.START_TIMEOUT_S))
        )

    def command(self) -> list[str]:
        args = self.spec.engine_args
        argv = [self.executable() or "vllm", "serve", self.spec.model_id]
        argv += ["--host", "127.0.0.1", "--port", str(self.port)]
        for key, flag in self.FLAGS.items():
            if key in args:
                argv += [flag, str(args[key])]
        argv += [flag for key, flag in self.SWITCHES.items() if args.get(key)]
        argv += [str(a) for a in args.get("extra_args", [])]
        return argv


def _has_nvidia_gpu() -> bool:
    try:
        import pynvml
    except ImportError:
        return shutil.which("nvidia-smi") is not None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    try:
        return bool(pynvml.nvmlDeviceGetCount() > 0)
    finally:
        pynvml.nvmlShutdown()


class Vllm(ManagedProvider):
    """GPU-served (energy metered) unless ``gpu = false``; counts with vLLM's own ``/tokenize``."""

    name = "vllm"
    engine = VllmEngine
    gpu = True
    tokenizer = "vllm"
    inline_form = "vllm:HF_MODEL_ID"

    def inline(self, text: str, rest: str) -> ModelSpec:
        return ModelSpec(name=text, provider=self.name, model_id=rest, source="inline")

    def check_table(self, name: str, data: Mapping[str, JSON]) -> None:
        """A misspelt vLLM option is said before anything starts, with the nearest known one."""
        engine = data.get("engine")
        if not isinstance(engine, dict):
            return
        known = [*VllmEngine.FLAGS, *VllmEngine.SWITCHES, *VllmEngine.OWN_KEYS]
        unknown = set(engine) - set(known)
        if unknown:
            line = unknown_keys_line(f"tool.slam.models.{name}.engine", unknown, known)
            raise ModelSpecError(f"{line} Other `vllm serve` flags go in extra_args.")
