"""The merge at 5 / 20 / 50 shards (issue 53), by hand: ``python bench/bench_merge_scale.py
[--steps 5,20,50] [--cases 5000] [--words 15-60]``.

At each step, S shard reports of N cases x 3 candidate models (``pytest_slam.testing.shards``:
written by the real report code, signed with a shard key) are merged by ``slam report merge``, one
process, its peak resident memory from ``os.wait4`` (its own) and its wall time. Prints each step
and the growth per step: (peak_b - peak_a) / (S_b - S_a) MiB and seconds a shard, the slope a
suite's cost follows, the fixed start taken off. The shards are written once for the largest step;
a smaller step merges the first S (its gate INCOMPLETE: the rest of the suite ran in no shard).
``--before DIR``: each step merged by the pytest-slam of another checkout too (its ``PYTHONPATH``),
the baseline on the same machine at the same load.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _at_size import run_peak
from _common import PYTHON, footer, header, table

from pytest_slam.testing.shards import write_shards

KEY = "bench-merge-scale-key"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default="5,20,50", help="shard counts, comma-separated")
    parser.add_argument("--cases", type=int, default=5000, help="cases per shard (x 3 models)")
    parser.add_argument("--words", default="15-60", help="words per answer, MIN-MAX")
    parser.add_argument("--before", type=Path, help="a checkout whose merge is measured beside")
    args = parser.parse_args()
    steps = sorted(int(s) for s in args.steps.split(","))
    low, high = (int(x) for x in args.words.split("-"))
    before = f" --before {args.before}" if args.before else ""
    header("The merge at size", f"python bench/bench_merge_scale.py --steps {args.steps} "
           f"--cases {args.cases} --words {args.words}{before}")  # fmt: skip
    env = {**os.environ, "SLAM_SHARD_KEY": KEY}
    os.environ["SLAM_SHARD_KEY"] = KEY  # the shards are signed as a shard's job signs them
    rows, found = [], []
    with tempfile.TemporaryDirectory(prefix="slam-bench-merge-scale-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        paths = write_shards(folder, steps[-1], args.cases, (low, high), whole=False).shards
        print(f"- {steps[-1]} shards written in {time.perf_counter() - start:.0f} s (not timed)\n")
        for shards in steps:
            cmd = [PYTHON, "-m", "pytest_slam.cli", "report", "merge",
                   *map(str, paths[:shards]), "-o", str(folder / "merged.json")]  # fmt: skip
            size = sum(p.stat().st_size for p in paths[:shards])
            for tree in ([args.before] if args.before else []) + [None]:
                here = {**env, "PYTHONPATH": str(tree.resolve())} if tree else env
                peak = run_peak(
                    cmd, folder, here, ok=(0, 1, 2, 6)
                )  # 6: the gate failed, as the shards meant
                name = f"before ({tree})" if tree else "this tree"
                print(
                    f"  {shards} shards, {name}: {peak.wall:.1f} s, {peak.mib:.0f} MiB", flush=True
                )
                if tree is None:
                    found.append((shards, peak))
                rows.append([name, str(shards), f"{shards * args.cases * 3:,}",
                             f"{size / 1e6:.0f} MB", f"{peak.wall:.1f}", f"{peak.mib:.0f}"])  # fmt: skip
    mine = [row for row in rows if row[0] == "this tree"]
    for row in rows:
        row += ["-", "-"]
    for (a, pa), (b, pb), row in zip(found, found[1:], mine[1:], strict=False):
        row[-2:] = [f"{(pb.mib - pa.mib) / (b - a):.1f}", f"{(pb.wall - pa.wall) / (b - a):.2f}"]
    table(["merge by", "shards", "outcomes", "shard files", "merge, s", "peak, MiB",
           "growth, MiB a shard", "growth, s a shard"], rows)  # fmt: skip
    footer()


if __name__ == "__main__":
    main()
