"""GPU telemetry through NVML (nvidia-ml-py, imported lazily): energy, power, memory, utilisation.

Energy of a call or a test is the change of NVML's total-energy counter (millijoules since the
driver loaded) between ``start()`` and ``stop()``, summed over the metered devices. A device
without that counter (older than Volta, some virtualised GPUs) has its energy integrated from
power readings taken by a background thread (trapezoid rule); ``EnergySample.method`` says which.
The counter is device-wide: other work on the same GPU is counted too, and so are calls that
overlap (each ``span()`` of concurrent calls sees the whole device). The counter moves in steps of
a few tens of milliseconds, so a very short call reads coarsely.

Without nvidia-ml-py, the NVML library or a GPU, the meter is not ``available`` and ``reason``
is one line for the report; ``stop()`` then returns an empty sample. It never raises for that.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_slam.records import JSON

MIB = 1024 * 1024


@dataclass
class EnergySample:
    """What the GPUs did between start() and stop(); all None when nothing was measured."""

    energy_j: float | None = None
    duration_s: float | None = None
    avg_power_w: float | None = None
    peak_memory_mib: float | None = None
    gpu_util_pct: float | None = None
    method: str | None = None  # "counter", "power-sampling" or "counter+power-sampling"
    devices: list[int] = field(default_factory=list)
    samples: int = 0

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)


def integrate_power(samples: Sequence[tuple[float, float]]) -> float:
    """Joules from ``(seconds, watts)`` readings in time order, by the trapezoid rule."""
    return math.fsum(
        (t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(samples)
    )


def energy_per_token(energy_j: float | None, completion_tokens: int | None) -> float | None:
    """Joules per output token; None when either is unknown or no token was produced."""
    return energy_j / completion_tokens if energy_j is not None and completion_tokens else None


def _unavailable(why: str) -> str:
    """Short enough to stand in the report's energy note on one 80-column line."""
    return f"GPU telemetry not available ({why})"


class GpuMeter:
    """Meters NVIDIA GPUs over a span of time: ``start()``, then ``stop() -> EnergySample``."""

    def __init__(self, device_indices: Sequence[int] | None = None, interval_s: float = 0.05):
        self.available = False
        self.reason = ""
        self.interval_s = interval_s
        self._nvml: Any = None  # the pynvml module, untyped: Any only at this boundary
        self._indices: list[int] = []
        self._handles: list[object] = []  # NVML device handles, opaque
        self._has_counter: list[bool] = []
        self._span: Span | None = None
        self._open(device_indices)

    def _open(self, device_indices: Sequence[int] | None) -> None:
        try:
            import pynvml
        except ImportError:
            self.reason = _unavailable(
                "nvidia-ml-py is not installed: pip install 'pytest-slam[gpu]'"
            )
            return
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound:
            self.reason = _unavailable("NVML library not found")
            return
        except pynvml.NVMLError as exc:
            self.reason = _unavailable(f"NVML did not start: {exc}")
            return
        self._nvml = pynvml
        try:
            self._attach(device_indices)
        except pynvml.NVMLError as exc:  # a driver/library mismatch, a GPU fallen off the bus
            self.close()
            self.reason = _unavailable(f"NVML failed: {exc}")

    def _attach(self, device_indices: Sequence[int] | None) -> None:
        nvml = self._nvml
        count = nvml.nvmlDeviceGetCount()
        indices = list(range(count)) if device_indices is None else list(device_indices)
        bad = [i for i in indices if not 0 <= i < count]
        if bad or not indices:
            self.close()
            if count == 0:
                self.reason = _unavailable("no NVIDIA GPU found")
                return
            raise ValueError(f"GpuMeter: device_indices {indices} must be within 0..{count - 1}")
        self._indices = indices
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        self._has_counter = [self._read_counter(h) is not None for h in self._handles]
        self.available = True
        self.reason = self._describe()

    def _describe(self) -> str:
        names = sorted({_text(self._nvml.nvmlDeviceGetName(h)) for h in self._handles})
        how = {True: "NVML's total-energy counter", False: "sampled power"}
        methods = " and ".join(how[ok] for ok in sorted(set(self._has_counter), reverse=True))
        n = len(self._handles)
        return (
            f"GPU telemetry: {n} device{'s' * (n > 1)} ({', '.join(names)}), energy from {methods}"
        )

    def _read_counter(self, handle: object) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except self._nvml.NVMLError:
            return None

    def start(self) -> None:
        """Begin a measurement: read the energy counters and start sampling in the background."""
        self._span = self.span(sample=True)
        self._span.start()

    def stop(self) -> EnergySample:
        """End the measurement; an empty sample when telemetry is unavailable or never started."""
        span, self._span = self._span, None
        return span.stop() if span is not None else EnergySample()

    def span(self, sample: bool = False) -> Span:
        """A measurement of its own, so overlapping calls (async product code) each get one.

        With ``sample=False`` power, memory and utilisation are not sampled in the background
        unless a device lacks the energy counter: a per-call span then costs two NVML reads.
        """
        return Span(self, sample or not all(self._has_counter))

    def close(self) -> None:
        """Release NVML (its init is reference-counted, so other users are unaffected)."""
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None
        self.available = False


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Span:
    """One measurement on a GpuMeter's devices: ``start()``, then ``stop() -> EnergySample``."""

    def __init__(self, meter: GpuMeter, sample: bool) -> None:
        self.meter = meter
        self.sampling = sample
        self._t0: float | None = None
        self._counters0: list[int | None] = []
        self._power: list[list[tuple[float, float]]] = []
        self._memory: list[float] = []
        self._util: list[float] = []
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Span:
        self._t0 = time.monotonic()
        meter = self.meter
        if not meter.available:
            return self
        self._counters0 = [meter._read_counter(h) for h in meter._handles]
        self._power = [[] for _ in meter._handles]
        if self.sampling:
            self._sample()
            self._thread = threading.Thread(target=self._run, name="slam-gpu-meter", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop_event.wait(self.meter.interval_s):
            self._sample()

    def _sample(self) -> None:
        """One reading of power, memory and utilisation per device; unsupported reads skipped."""
        meter, now, memory = self.meter, time.monotonic(), 0.0
        nvml = meter._nvml
        for series, handle in zip(self._power, meter._handles, strict=True):
            with contextlib.suppress(nvml.NVMLError):
                series.append((now, nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0))
            with contextlib.suppress(nvml.NVMLError):
                memory += nvml.nvmlDeviceGetMemoryInfo(handle).used / MIB
            with contextlib.suppress(nvml.NVMLError):
                self._util.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        self._memory.append(memory)

    def stop(self) -> EnergySample:
        """End the measurement; an empty sample when telemetry is unavailable or never started."""
        if self._t0 is None or not self.meter.available:
            return EnergySample()
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join()
        if self.sampling:
            self._sample()
        duration = time.monotonic() - self._t0
        energy, methods = self._energy()
        self._t0 = None
        return EnergySample(
            energy_j=energy,
            duration_s=duration,
            avg_power_w=energy / duration if duration > 0 else None,
            peak_memory_mib=max(self._memory) if self._memory else None,
            gpu_util_pct=math.fsum(self._util) / len(self._util) if self._util else None,
            method="+".join(sorted(methods)),
            devices=list(self.meter._indices),
            samples=len(self._memory),
        )

    def _energy(self) -> tuple[float, set[str]]:
        """Joules summed over devices: counter delta where there is one, else integrated power."""
        total, methods = 0.0, set()
        handles = self.meter._handles
        for handle, start, series in zip(handles, self._counters0, self._power, strict=True):
            end = self.meter._read_counter(handle) if start is not None else None
            if start is not None and end is not None:
                total += (end - start) / 1000.0
                methods.add("counter")
            else:
                total += integrate_power(series)
                methods.add("power-sampling")
        return total, methods
