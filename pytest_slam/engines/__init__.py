"""Managed local engines: start a model's server once per session, on loopback, and always stop it.

Each engine runs under ``engines.supervise`` so that it dies with the pytest process that owns it, even
after SIGKILL. The controller (or the only process, without xdist) owns every engine; xdist workers are
handed the URLs and never start one, so ``-n N`` still means one engine per model.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from pathlib import Path

from ..models import resolve_model_path
from ..records import ModelSpec

LOG_TAIL_LINES = 20


class EngineError(RuntimeError):
    """An engine could not start or is unusable here; the message says why and what to do."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Engine(ABC):
    """How one kind of server is launched and health-checked."""

    kind: str = ""

    def __init__(self, spec: ModelSpec, port: int) -> None:
        self.spec = spec
        self.port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/health"

    @abstractmethod
    def check_available(self) -> None:
        """Raise EngineError when this machine cannot run the engine at all."""

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that serves the model on 127.0.0.1:port."""


class LlamaCppEngine(Engine):
    kind = "llama.cpp"

    def check_available(self) -> None:
        import importlib.util

        if importlib.util.find_spec("xllamacpp") is None:
            raise EngineError(
                f"model {self.spec.name!r} needs llama.cpp: pip install 'pytest-slam[llamacpp]'."
            )
        path = resolve_model_path(str(self.spec.engine_args.get("model_path", "")))
        if not path.is_file():
            raise EngineError(f"model {self.spec.name!r}: no GGUF file at {path}.")

    def command(self) -> list[str]:
        args = self.spec.engine_args
        path = resolve_model_path(str(args.get("model_path", "")))
        return [
            sys.executable,
            "-m",
            "pytest_slam.engines.llamacpp_main",
            "--model",
            str(path),
            "--port",
            str(self.port),
            "--threads",
            str(args.get("threads", 2)),
            "--ctx",
            str(args.get("ctx", 4096)),
            "--parallel",
            str(args.get("parallel", 1)),
        ]


class VllmEngine(Engine):
    """``vllm serve MODEL`` on a GPU machine; options map one to one onto vLLM's own flags."""

    kind = "vLLM"
    FLAGS = {
        "dtype": "--dtype",
        "max_model_len": "--max-model-len",
        "gpu_memory_utilization": "--gpu-memory-utilization",
        "tensor_parallel_size": "--tensor-parallel-size",
        "seed": "--seed",
        "quantization": "--quantization",
    }

    def check_available(self) -> None:
        exe = self.executable()
        gpu = _has_nvidia_gpu()
        if exe is None or not gpu:
            missing = [what for what, ok in (("vLLM", exe), ("a CUDA GPU", gpu)) if not ok]
            raise EngineError(
                f"model {self.spec.name!r} is served by vLLM, which needs vLLM and a CUDA GPU; "
                f"this machine has no {' and no '.join(missing)}. Run it on a GPU machine with "
                "`pip install 'pytest-slam[vllm]'`, or point the model at a running server "
                "with base_url in [tool.slam.models.NAME]."
            )

    def executable(self) -> str | None:
        return self.spec.engine_args.get("executable") or shutil.which("vllm")

    def command(self) -> list[str]:
        args = self.spec.engine_args
        argv = [
            self.executable() or "vllm",
            "serve",
            self.spec.model_id,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        for key, flag in self.FLAGS.items():
            if key in args:
                argv += [flag, str(args[key])]
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
        return pynvml.nvmlDeviceGetCount() > 0
    finally:
        pynvml.nvmlShutdown()


ENGINES: dict[str, type[Engine]] = {"llamacpp": LlamaCppEngine, "vllm": VllmEngine}


class ManagedServer:
    """One running engine: its supervisor process, port and log file."""

    def __init__(self, engine: Engine, log_dir: Path) -> None:
        self.engine = engine
        self.log_path = (
            log_dir / f"engine-{engine.spec.name.replace('/', '_').replace(':', '_')}.log"
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s: float | None = None

    def start(self, timeout_s: float) -> None:
        self.engine.check_available()
        argv = [
            sys.executable,
            "-m",
            "pytest_slam.engines.supervise",
            "--owner",
            str(os.getpid()),
            "--",
            *self.engine.command(),
        ]
        t0 = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self._wait_healthy(timeout_s)
        self.started_s = time.perf_counter() - t0

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                self._fail(f"exited with code {self.proc.returncode} while starting")
            if _healthy(self.engine.health_url):
                return
            time.sleep(0.05)
        self.stop()
        self._fail(f"was not healthy after {timeout_s:.0f} s")

    def _fail(self, what: str) -> None:
        raise EngineError(
            f"{self.engine.kind} engine for model {self.engine.spec.name!r} on "
            f"{self.engine.base_url} {what}. Last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start_engine(spec: ModelSpec, log_dir: Path | None, timeout_s: float) -> ManagedServer:
    """Start the engine a local model needs and return it running; ``spec.base_urls`` is set."""
    engine_cls = ENGINES.get(spec.provider)
    if engine_cls is None:
        raise EngineError(f"model {spec.name!r} ({spec.provider}) has no managed engine.")
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="slam-engines-"))
    server = ManagedServer(engine_cls(spec, free_port()), log_dir)
    server.start(timeout_s)
    spec.base_urls = [server.engine.base_url]
    return server
