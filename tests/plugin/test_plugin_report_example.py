"""The example product, run as its team runs it, writes the verdict; Chromium draws the chart.

``examples/support_triage`` runs on the embedded SmolLM2-135M (a real llama.cpp engine) against its
curated reference. Only the two sentiment tests run (``-k``): their answers are one word, so the run
is short; the other tests ask for JSON and long replies, which a 135M model writes slowly.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from patience import patient
from slam_helpers import CHROMIUM, needs_chromium

from pytest_slam.report.charts import COLORS, REF_COLOR

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_triage"


@pytest.fixture(scope="module")
def example_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, Path]:
    """``cd examples/support_triage && python -m pytest -k customer_is --slm-report --slm-html``."""
    out = tmp_path_factory.mktemp("example")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_triage.py",
           "-k", "customer_is", f"--slm-report={out / 'run.json'}",
           f"--slm-html={out / 'run.html'}"]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=EXAMPLE, capture_output=True, text=True, timeout=patient(600), check=False
    )
    return done, out


def test_the_example_writes_table_json_and_html(example_run) -> None:
    done, out = example_run
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]  # 1: SmolLM2 erred
    assert "smollm2-135m" in done.stdout and "curated (ref)" in done.stdout
    assert f"JSON report: {out / 'run.json'}" in done.stdout
    report = json.loads((out / "run.json").read_text(encoding="utf-8"))
    (row,) = report["models"]
    assert row["model"] == "smollm2-135m" and row["tests_passed"] + row["tests_failed"] == 2
    assert row["cold_starts"] == 1 and row["calls"] == 2  # the engine's warm-up is not a call
    assert row["cost_per_call_usd"] > 0 and row["equivalence_mean"] is not None
    assert report["reference"]["model"] == "curated" and report["gate"]["configured"] is True
    assert [t["test"].split("::")[1] for t in report["tests"]] == [
        "test_angry_customer_is_negative", "test_happy_customer_is_positive"]  # fmt: skip
    page = (out / "run.html").read_text(encoding="utf-8")
    assert '<g class="point" data-model="smollm2-135m"' in page
    assert '<g class="reference-line" data-model="curated">' in page


@needs_chromium
def test_chromium_screenshot_shows_the_quality_cost_chart(example_run) -> None:
    _, out = example_run
    shot = out / "run.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           f"--user-data-dir={out / 'profile'}", "--window-size=1280,1100",
           f"--screenshot={shot}", (out / "run.html").as_uri()]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=patient(120), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    pixels = decode_png(shot.read_bytes())
    assert pixels.shape == (1100, 1280, 3)
    gate = json.loads((out / "run.json").read_text(encoding="utf-8"))["models"][0]["gate"]
    y, x = solid_block(pixels, COLORS[gate], size=7)  # the model's point: no glyph is that solid
    assert 400 < y < 1100 and x < 640  # in the left chart, below the tables
    line = np.all(pixels == _rgb(REF_COLOR), axis=2)  # the curated reference: a dashed line at 1
    assert line.sum(axis=1).max() > 200  # a row of dashes across the plot


def _rgb(color: str) -> list[int]:
    return [int(color[i : i + 2], 16) for i in (1, 3, 5)]


def solid_block(pixels: np.ndarray, color: str, size: int) -> tuple[int, int]:
    """Top-left corner of the first ``size`` x ``size`` square painted entirely in ``color``."""
    mask = np.all(pixels == _rgb(color), axis=2).astype(np.int32)
    sums = np.pad(mask, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    full = sums[size:, size:] - sums[:-size, size:] - sums[size:, :-size] + sums[:-size, :-size]
    found = np.argwhere(full == size * size)
    assert len(found), f"no {size}x{size} square of {color} in the screenshot"
    return int(found[0][0]), int(found[0][1])


def decode_png(data: bytes) -> np.ndarray:
    """RGB pixels of an 8-bit, non-interlaced PNG (what Chromium writes), with stdlib zlib."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = {}, 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunks[kind] = chunks.get(kind, b"") + data[pos + 8 : pos + 8 + n]
        pos += 12 + n
    w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and color in (2, 6) and not interlace
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, w * bpp + 1)
    rows, prev = [], np.zeros(w * bpp, np.int64)
    for line in raw:
        prev = _unfilter(int(line[0]), line[1:].astype(np.int64), prev, bpp)
        rows.append(prev)
    return np.array(rows, np.uint8).reshape(h, w, bpp)[:, :, :3]


def _unfilter(kind: int, line: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    if kind == 0:
        return line
    if kind == 1:  # Sub: a running sum per channel
        return line.reshape(-1, bpp).cumsum(0).reshape(-1) % 256
    if kind == 2:
        return (line + prev) % 256
    out, up = [0] * len(line), prev.tolist()
    for i, value in enumerate(line.tolist()):  # Average and Paeth depend on the byte just made
        a, b = out[i - bpp] if i >= bpp else 0, up[i]
        if kind == 3:
            out[i] = (value + (a + b) // 2) & 255
            continue
        c = up[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        out[i] = (value + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.array(out, np.int64)
