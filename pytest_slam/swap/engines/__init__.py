"""Managed local engines: start a model's server once per session, on loopback, and always stop it.

Each engine runs under ``engines.supervise`` so that it dies with the pytest process that owns it, even
after SIGKILL. The controller (or the only process, without xdist) owns every engine; xdist workers are
handed the URLs and never start one, so ``-n N`` still means one engine per model.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from pytest_slam.errors import SlamError
from pytest_slam.records import ModelSpec
from pytest_slam.swap import upstream
from pytest_slam.swap.models import resolve_model_path

LOG_TAIL_LINES = 20
Say = Callable[[str], None]  # where progress lines go (run/progress.py), one line per call


class EngineError(RuntimeError, SlamError, kind="engine"):
    """An engine could not start or is unusable here; the message says why and what to do."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Engine(ABC):
    """How one kind of server is launched and health-checked."""

    kind: str = ""

    def __init__(self, spec: ModelSpec, port: int, slots: int = 1) -> None:
        self.spec = spec
        self.port = port
        self.slots = max(1, slots)  # requests the run may send at once (its xdist workers)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/health"

    @abstractmethod
    def check_available(self) -> None:
        """Raise EngineError when this machine cannot run the engine at all."""

    def start_timeout(self, timeout_s: float) -> float:
        """How long a start may take before it is called failed (``engine_timeout_s``)."""
        return timeout_s

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that serves the model on 127.0.0.1:port."""

    def describe(self) -> str:
        """How it serves, for the run's start line."""
        return self.kind

    def source(self) -> str:
        """Where the model's weights come from, for the run's progress lines."""
        return f"model {self.spec.model_id}"


# llama.cpp splits its context between slots, so each slot gets the configured ``ctx`` and the KV
# cache grows with the slot count. Its size per token is estimated from the GGUF file (about
# file_size / KV_TOKENS_PER_FILE: SmolLM2-135M Q4_1 is 98 MB and 23 KB/token; a 7B Q4 model is
# over-estimated, which errs on the safe side); the slots may take at most MEMORY_SHARE of the
# memory available at start.
KV_TOKENS_PER_FILE = 4096
MEMORY_SHARE = 0.5


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
    """llama.cpp (xllamacpp) in a process of its own, with one slot per xdist worker by default."""

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
        ]


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
        lacks = {(False, False): "neither vLLM nor a CUDA GPU", (False, True): "no vLLM",
                 (True, False): "no CUDA GPU"}.get((has_vllm, has_gpu))  # fmt: skip
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

    def start(self, timeout_s: float, say: Say | None = None, beat_s: float = 0.0) -> None:
        """Start it and wait until it is healthy; ``say`` hears where the model comes from, the
        start, every ``beat_s`` seconds of a long start (0: never) and the ready line."""
        self.engine.check_available()
        name, started = self.engine.spec.name, time.perf_counter()
        if say is not None:
            say(f"engine {name}: {self.engine.source()}")
            say(f"engine {name} ({self.engine.describe()}) starting ...")
        argv = [
            sys.executable,
            "-m",
            "pytest_slam.swap.engines.supervise",
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
        try:
            self._wait_healthy(self.engine.start_timeout(timeout_s), say, beat_s)
        except BaseException:  # Ctrl-C while it loads: nobody else holds it to stop it
            self.stop()
            if say is not None:
                say(f"engine {name} did not start ({time.perf_counter() - started:.1f} s)")
            raise
        self.started_s = time.perf_counter() - t0
        if say is not None:
            say(f"engine {name} ready in {self.started_s:.1f} s on {self.engine.base_url}")

    def start_line(self) -> str:
        """One summary line: which engine serves the model, how, where, and how long it took."""
        took = f", up in {self.started_s:.1f} s" if self.started_s is not None else ""
        return (
            f"engine {self.engine.spec.name}: {self.engine.describe()}, "
            f"on {self.engine.base_url}{took}"
        )

    def _wait_healthy(self, timeout_s: float, say: Say | None = None, beat_s: float = 0.0) -> None:
        start = time.monotonic()
        deadline, beat = start + timeout_s, start + beat_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                self._fail(f"exited with code {self.proc.returncode} while starting")
            if _healthy(self.engine.health_url):
                return
            if say is not None and beat_s > 0 and time.monotonic() >= beat:
                beat += beat_s
                say(
                    f"engine {self.engine.spec.name} still starting "
                    f"({time.monotonic() - start:.0f} s; log {self.log_path})"
                )
            time.sleep(0.05)
        self.stop()
        self._fail(f"was not healthy after {timeout_s:.0f} s")

    def _fail(self, what: str) -> None:
        raise EngineError(
            f"{self.engine.kind} engine for model {self.engine.spec.name!r} on "
            f"{self.engine.base_url} {what}. Last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """Ask the supervisor to stop the engine; kill it when that takes too long or the user
        presses Ctrl-C again (the engine dies with the supervisor: its parent-death signal)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(15)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    """One readiness poll, on the unpatched connection classes (``upstream.urlopen``): a serial run
    starts its engine inside the first opted-in test, where a product's vcrpy cassette would
    otherwise record the polls (and fail to replay them: the port changes every run)."""
    try:
        with upstream.urlopen(url, timeout=1.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start_engine(
    spec: ModelSpec,
    log_dir: Path | None,
    timeout_s: float,
    slots: int = 1,
    say: Say | None = None,
    beat_s: float = 0.0,
) -> ManagedServer:
    """Start the engine a local model needs and return it running; ``spec.base_urls`` is set.

    ``slots``: how many requests the run may send at once (its xdist workers); ``log_dir``: the
    plugin passes a folder under pytest's basetemp, so pytest's retention removes old logs;
    ``say`` and ``beat_s``: progress lines (``ManagedServer.start``).
    """
    engine_cls = ENGINES.get(spec.provider)
    if engine_cls is None:
        raise EngineError(f"model {spec.name!r} ({spec.provider}) has no managed engine.")
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="slam-engines-"))
    server = ManagedServer(engine_cls(spec, free_port(), slots), log_dir)
    server.start(timeout_s, say, beat_s)
    spec.base_urls = [server.engine.base_url]
    return server
