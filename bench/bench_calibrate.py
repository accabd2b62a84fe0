"""Calibration at the size of real label sets (issue 28): ``slam calibrate`` on ~1,800 long pairs.

    python bench/bench_calibrate.py [--pairs 1800] [--runs 2] [--before OTHER_TREE]

The pairs are MT-Bench graded (``validity_data.mt_bench_graded``: GPT-4's answer as the reference,
a candidate acceptable when GPT-4 graded it 7 or more), the first ``--pairs`` of them, written as a
labels file. Each run is ``slam calibrate --labels FILE --dry-run`` in a process of its own, all
scorers (fuzzy x3, length, semantic), in a fresh project folder whose ``.slam`` cache starts empty:
run 1 is cold (every embedding computed and cached), later runs warm. ``--before`` times the same
command with ``PYTHONPATH=OTHER_TREE`` (no cache there). Prints wall and CPU seconds per run and
checks that every run printed the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validity_data import mt_bench_graded

TREE = Path(__file__).resolve().parents[1]


def write_labels(path: Path, n: int) -> int:
    pairs = mt_bench_graded()[:n]
    with path.open("w", encoding="utf-8") as f:
        for p in pairs:
            row = {"candidate": p.candidate, "reference": p.reference, "label": p.label}
            f.write(json.dumps(row | {"unit": p.unit}) + "\n")
    return len(pairs)


def timed(tree: Path, project: Path, labels: Path) -> tuple[float, float, str]:
    env = os.environ | {"PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_slam.cli",
            "calibrate",
            "--labels",
            str(labels),
            "--dry-run",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"slam calibrate failed ({done.returncode}): {done.stdout}{done.stderr}")
    return wall, cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=1800)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project, labels = Path(tmp), Path(tmp) / "labels.jsonl"
        (project / "pyproject.toml").write_text("[tool.slam]\n", encoding="utf-8")
        n = write_labels(labels, args.pairs)
        print(f"{n} MT-Bench graded pairs, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print("\n| tree | run | wall s | CPU s |\n|---|---|---|---|")
        tables = []
        if args.before is not None:
            wall, cpu, out = timed(args.before, project, labels)
            tables.append(out)
            print(f"| before ({args.before}) | 1 | {wall:.1f} | {cpu:.1f} |", flush=True)
        for run in range(1, args.runs + 1):
            wall, cpu, out = timed(TREE, project, labels)
            tables.append(out)
            kind = "cold cache" if run == 1 else "warm cache"
            print(f"| this tree | {run} ({kind}) | {wall:.1f} | {cpu:.1f} |", flush=True)
        same = all(t == tables[0] for t in tables)
        print(f"\nload after {os.getloadavg()[0]:.1f}; every run printed the same table: {same}")
        if not same:
            for t in tables:
                print(t)


if __name__ == "__main__":
    main()
