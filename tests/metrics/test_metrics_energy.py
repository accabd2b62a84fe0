"""Tests of metrics.energy against the real NVML situation of the machine, never a mock.

On a machine without a GPU (CI, developers) the no-GPU path runs for real: nvidia-ml-py is
installed and ``nvmlInit()`` fails with NVMLError_LibraryNotFound. On a GPU machine the other
test measures for real instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_slam.metrics.energy import EnergySample, GpuMeter, energy_per_token, integrate_power


@pytest.fixture
def meter():
    gpu_meter = GpuMeter()
    yield gpu_meter
    gpu_meter.close()


def test_integrate_power_by_trapezoid_rule() -> None:
    # 0-1 s: 100 -> 200 W = 150 J; 1-3 s: steady 200 W = 400 J.
    assert integrate_power([(0.0, 100.0), (1.0, 200.0), (3.0, 200.0)]) == pytest.approx(550.0)
    assert integrate_power([(5.0, 300.0)]) == 0.0
    assert integrate_power([]) == 0.0


def test_energy_per_token() -> None:
    assert energy_per_token(10.0, 4) == 2.5
    assert energy_per_token(None, 4) is None
    assert energy_per_token(10.0, 0) is None


def test_without_gpu_meter_says_so_in_one_line(meter: GpuMeter) -> None:
    if meter.available:
        pytest.skip(f"a GPU is present ({meter.reason}): the no-GPU path cannot run here")
    assert meter.reason == "GPU telemetry not available (NVML library not found)"
    meter.start()
    sample = meter.stop()
    assert sample == EnergySample()
    assert sample.energy_j is None and sample.method is None
    assert json.loads(json.dumps(sample.as_dict()))["devices"] == []


def test_without_gpu_device_indices_do_not_raise() -> None:
    gpu_meter = GpuMeter(device_indices=[3])
    if gpu_meter.available:
        pytest.skip("a GPU is present: the no-GPU path cannot run here")
    assert gpu_meter.stop() == EnergySample()  # stop before start is harmless too


def test_missing_nvidia_ml_py_names_the_extra() -> None:
    # A fresh interpreter where `import pynvml` fails, as on an install without the extra.
    code = (
        "import sys; sys.modules['pynvml'] = None\n"
        "from pytest_slam.metrics.energy import GpuMeter\n"
        "print(GpuMeter().reason)"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == (
        "GPU telemetry not available (nvidia-ml-py is not installed: "
        "pip install 'pytest-slam[gpu]')"
    )
    assert out.stderr == ""


def test_with_gpu_measures_energy(meter: GpuMeter) -> None:
    if not meter.available:
        pytest.skip(meter.reason)
    meter.start()
    time.sleep(0.3)  # something to measure, not a timing assertion
    sample = meter.stop()
    assert sample.energy_j is not None and sample.energy_j >= 0
    assert sample.method in ("counter", "power-sampling", "counter+power-sampling")
    assert sample.samples >= 2
    assert sample.peak_memory_mib is not None and sample.peak_memory_mib > 0


def test_without_gpu_a_span_is_empty_too(meter: GpuMeter) -> None:
    if meter.available:
        pytest.skip(f"a GPU is present ({meter.reason}): the no-GPU path cannot run here")
    assert meter.span().start().stop() == EnergySample()


def test_with_gpu_overlapping_spans_measure_apart(meter: GpuMeter) -> None:
    if not meter.available:
        pytest.skip(meter.reason)
    outer = meter.span().start()
    inner = meter.span().start()  # a second call in flight at the same time
    time.sleep(0.3)  # something to measure, not a timing assertion
    first = inner.stop()
    time.sleep(0.3)
    second = outer.stop()
    assert first.energy_j is not None and second.energy_j is not None
    assert second.energy_j >= first.energy_j  # the outer span covers the inner one
    assert first.samples == 0 or first.method != "counter"  # no sampling thread when counted


def test_overlapping_calls_share_the_gpu_time_they_spent_together() -> None:
    """With calls in flight at once (answers fetched ahead), each call's span energy is divided
    among them: shares x spans add up to the busy time, never to n times it."""
    from pytest_slam.metrics.metering import Overlap

    now = [0.0]
    overlap = Overlap(clock=lambda: now[0])
    alone = overlap.enter()
    now[0] = 5.0
    assert overlap.leave(alone) == 1.0

    now[0] = 10.0
    a = overlap.enter()  # a alone for 10 s, with b for 10 s, alone again for 10 s
    now[0] = 20.0
    b = overlap.enter()
    now[0] = 30.0
    share_b = overlap.leave(b)
    now[0] = 40.0
    share_a = overlap.leave(a)
    assert share_b == 0.5 and share_a == 25.0 / 30.0
    assert share_a * 30.0 + share_b * 10.0 == 30.0  # the busy time once, not twice
