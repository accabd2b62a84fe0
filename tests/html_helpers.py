"""Reading a written HTML report: the rows and pairs its script draws, and Chromium's view of it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from patience import patient
from slam_helpers import CHROMIUM

from pytest_slam.report.diffview import uncut_runs
from pytest_slam.report.htmldata import unpack


def report_data(page: str) -> tuple[dict[str, Any], list[list[Any]]]:
    """The rows (with the test names and models they index) and every answer pair, in the
    page's order: what the page carries packed for its script."""
    rows = json.loads(unpack(_packed(page, "PACKED_ROWS")))
    lines = unpack(_packed(page, "PACKED_PAIRS")).split("\n")
    return rows, [pair for line in lines if line for pair in json.loads(line)]


def _packed(page: str, name: str) -> str:
    found = re.search(rf'\b{name} = "([\w=-]*)"', page)
    assert found is not None, f"{name} not in the page"
    return found.group(1)


def sides(pair: list[Any]) -> tuple[str | None, str]:
    """A pair's reference and candidate answers as the page shows them: changes in
    ``<del>``/``<ins>`` (text not escaped); no reference when the golden answer is missing. The
    page's script diffs the pair's two texts (``worddiff.js``); the Python diff it ports stands in
    here (``test_report_worddiff_js.py`` checks they agree)."""
    if pair[6] is None:
        return None, pair[7]
    runs, _ = uncut_runs(pair[6], pair[7])
    ref = "".join(
        t if i % 3 == 0 else f"<del>{t}</del>" for i, t in enumerate(runs) if t and i % 3 != 2
    )
    cand = "".join(
        t if i % 3 == 0 else f"<ins>{t}</ins>" for i, t in enumerate(runs) if t and i % 3 != 1
    )
    return ref, cand


def chromium(url: str, *args: str, tmp_path: Path) -> str:
    """What headless Chromium prints for ``url`` (with ``--dump-dom``: the DOM once the page's
    script has drawn it; virtual time lets the script's unpacking finish first)."""
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000",
        "--virtual-time-budget=10000", *args, url,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=patient(120), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
