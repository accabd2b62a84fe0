"""What every bench script shares: the machine and versions header, repeated timing, tables, servers.

The benches are run by hand on a shared machine, so every figure is a median over repeats, printed
with its spread and the load average before and after, and compared with a baseline measured in the
same run (a ratio survives a busy machine better than a raw time does).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DISTS = ("pytest-slam", "pytest", "openai", "pytest-xdist", "rapidfuzz", "xllamacpp")


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def load() -> str:
    """The 1/5/15-minute load averages, as ``uptime`` prints them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def header(title: str, command: str) -> None:
    """Print what the numbers below depend on: machine, versions, load now, and how to rerun."""
    print(f"## {title}\n")
    print(f"- command: `{command}`")
    print(f"- machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"- python {platform.python_version()}; " + ", ".join(f"{d} {version(d)}" for d in DISTS))
    print(f"- load average at start (1, 5, 15 min): {load()}")
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")


def footer() -> None:
    print(f"\n- load average at end (1, 5, 15 min): {load()}\n")


@dataclass
class Sample:
    """Repeated measurements of one figure; printed as median (min-max)."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def show(self, fmt: str = "{:.2f}") -> str:
        if not self.values:
            return "n/a"
        if len(self.values) == 1:
            return fmt.format(self.median)
        low, high = min(self.values), max(self.values)
        return f"{fmt.format(self.median)} ({fmt.format(low)}-{fmt.format(high)})"


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "n/a"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A Markdown table, so the output pastes into bench/README.md as it is."""
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---" for _ in headers) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


@dataclass
class Timing:
    """One process run: wall seconds, and the CPU seconds (user + system) it used itself."""

    wall: float
    cpu: float


def run_timed(cmd: list[str], cwd: Path, env: dict[str, str], ok: Sequence[int] = (0,)) -> Timing:
    """Run a command to its end; a failure prints its output and stops the bench.

    CPU time counts the process's own threads (the swap proxy's included) and not the servers it
    called; on a shared machine it moves much less with the load than wall time does.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"bench: `{' '.join(cmd)}` exited {proc.returncode} in {cwd}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without an outer swap's OpenAI variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_"))}
    env.pop("GITHUB_STEP_SUMMARY", None)
    # Bytecode is cached, as on a developer's machine or a CI cache: with PYTHONDONTWRITEBYTECODE
    # (set on some shared machines) every import compiles from source, and the modules a run first
    # imports during its tests would pass for per-case cost.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def trees(before: Path | None) -> dict[str, Path | None]:
    """The trees a bench compares: this one, "after", and ``--before``'s, run by ``PYTHONPATH``."""
    found: dict[str, Path | None] = {"after": None}
    if before is not None:
        found["before"] = before.resolve()
    return found


def tree_env(tree: Path | None, **extra: str) -> dict[str, str]:
    """``clean_env(**extra)``, importing the package from ``tree`` when one is given."""
    env = clean_env(**extra)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


@contextlib.contextmanager
def fake_server(
    latency_ms: float = 0.0,
    answer: str | None = None,
    model: str = "gpt-4-0613",
    batch: int | None = None,
    step_ms: float | None = None,
) -> Iterator[str]:
    """A FakeOpenAI in its own process (so it never competes for the bench's GIL); yields its URL.

    ``batch`` (and ``step_ms``) make it a batching engine: up to ``batch`` requests per step."""
    cmd = [PYTHON, "-m", "pytest_slam.testing.fake_openai", "--port", "0",
           "--latency-ms", str(latency_ms), "--model", model]  # fmt: skip
    if answer is not None:
        cmd += ["--answer", answer]
    if batch is not None:
        cmd += ["--batch", str(batch)]
    if step_ms is not None:
        cmd += ["--step-ms", str(step_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit(f"bench: the fake server did not start ({url!r})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def fake_stats(url: str, reset: bool = False) -> dict[str, int]:
    """A fake server's counts (chat requests, distinct bodies, peak in flight, steps, peak batch);
    ``reset`` clears them after reading, so the next arm counts only its own."""
    root = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/fake/stats", timeout=30) as response:
        stats: dict[str, int] = json.loads(response.read())
    if reset:
        request = urllib.request.Request(f"{root}/fake/stats/reset", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    return stats


# Short chat prompts for the engine benches: small, varied answers from a small model.
ENGINE_PROMPTS = [
    "Say hello in one short sentence.",
    "Name three colours.",
    "What is the capital of France?",
    "Write one sentence about the sea.",
    "Count from one to five.",
    "Give a one-line tip for writing tests.",
]


def engine_project(prefix: str, url: str, model_id: str, files: dict[str, str]) -> Path:
    """A throwaway product whose suite (``tests/``) is opted in with one engine as the candidate."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / "tests").mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.slam]\n'
        f'models = ["{url}#{model_id}"]\nreference = "none"\npaths = ["tests"]\n'
    )
    return root


def sized_options(parser: argparse.ArgumentParser) -> None:
    """The options of a bench that times a step of the report at sizes, tree against tree, each
    in a child process of its own (bench_html.py, bench_json_report.py)."""
    parser.add_argument("--cases", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--child", type=int, default=None)


def child_result(script: Path, args: list[str], tree: Path | None, n: int) -> dict[str, Any]:
    """``script --child`` run in ``tree`` (this one when None): the JSON line it printed last; a
    failure stops the bench with its error."""
    done = subprocess.run([PYTHON, str(script), *args], cwd=script.parent, env=tree_env(tree),
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"bench: {tree or 'this tree'} at {n}: {done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found
