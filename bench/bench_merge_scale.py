"""The merge at 5 / 20 / 50 shards (issue 53), by hand: ``python bench/bench_merge_scale.py
[--steps 5,20,50] [--cases 5000] [--words 15-60] [--rounds 1] [--shards DIR] [--before DIR]``.

At each step, S shard reports of N cases x 3 candidate models (``pytest_slam.testing.shards``:
written by the real report code, signed with a shard key) are merged by ``slam report merge``, one
process, its peak resident memory from ``os.wait4`` (its own), its wall and CPU time. Prints each
step and the growth per step: (peak_b - peak_a) / (S_b - S_a) MiB and seconds a shard, the slope a
suite's cost follows, the fixed start taken off. The shards are written once for the largest step;
a smaller step merges the first S (its gate INCOMPLETE: the rest of the suite ran in no shard).
``--shards DIR``: the shards are written there, or taken from there when a run with the same
``--cases`` and ``--words`` wrote as many already (20 x 5,000 x 3 takes minutes to write).
``--before DIR``: each step merged by the pytest-slam of another checkout too (its ``PYTHONPATH``),
the baseline on the same machine at the same load; ``--rounds`` alternates the two that many times
a step and gives the medians (the machine is shared: its load moves between two merges).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _at_size import Peak, run_peak
from _common import PYTHON, footer, header, table

from pytest_slam.testing.shards import write_shards

KEY = "bench-merge-scale-key"


def shards_in(folder: Path, shards: int, cases: int, words: tuple[int, int]) -> list[Path]:
    """The shard files in ``folder``, written there unless a run with these figures did."""
    marker = folder / "shards.json"
    wanted = {"cases": cases, "words": list(words)}
    paths = [folder / f"shard{i:02d}.json" for i in range(shards)]
    if marker.is_file():
        written = json.loads(marker.read_text())
        if written.get("shards", 0) >= shards and {k: written.get(k) for k in wanted} == wanted:
            print(f"- {shards} shards taken from {folder} (written before)\n")
            return paths
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    write_shards(folder, shards, cases, words, whole=False)
    marker.write_text(json.dumps({**wanted, "shards": shards}))
    print(f"- {shards} shards written in {time.perf_counter() - start:.0f} s (not timed)\n")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default="5,20,50", help="shard counts, comma-separated")
    parser.add_argument("--cases", type=int, default=5000, help="cases per shard (x 3 models)")
    parser.add_argument("--words", default="15-60", help="words per answer, MIN-MAX")
    parser.add_argument("--before", type=Path, help="a checkout whose merge is measured beside")
    parser.add_argument("--rounds", type=int, default=1, help="merges a tree a step (medians)")
    parser.add_argument("--shards", type=Path, help="a folder the shards are kept in")
    args = parser.parse_args()
    steps = sorted(int(s) for s in args.steps.split(","))
    low, high = (int(x) for x in args.words.split("-"))
    before = f" --before {args.before}" if args.before else ""
    header("The merge at size", f"python bench/bench_merge_scale.py --steps {args.steps} "
           f"--cases {args.cases} --words {args.words} --rounds {args.rounds}{before}")  # fmt: skip
    env = {**os.environ, "SLAM_SHARD_KEY": KEY}
    os.environ["SLAM_SHARD_KEY"] = KEY  # the shards are signed as a shard's job signs them
    trees: list[Path | None] = [*([args.before] if args.before else []), None]
    with tempfile.TemporaryDirectory(prefix="slam-bench-merge-scale-") as tmp:
        folder = Path(tmp)
        paths = shards_in(args.shards or folder, steps[-1], args.cases, (low, high))
        found: dict[tuple[int, Path | None], list[Peak]] = {}
        for shards in steps:
            cmd = [PYTHON, "-m", "pytest_slam.cli", "report", "merge",
                   *map(str, paths[:shards]), "-o", str(folder / "merged.json")]  # fmt: skip
            for _ in range(args.rounds):
                for tree in trees:
                    here = {**env, "PYTHONPATH": str(tree.resolve())} if tree else env
                    # 6: the gate failed, as the shards meant; 2: a smaller step is incomplete
                    peak = run_peak(cmd, folder, here, ok=(0, 1, 2, 6))
                    found.setdefault((shards, tree), []).append(peak)
                    print(f"  {shards} shards, {_name(tree)}: {peak.wall:.1f} s, "
                          f"CPU {peak.cpu:.1f} s, {peak.mib:.0f} MiB", flush=True)  # fmt: skip
        sizes = {s: sum(p.stat().st_size for p in paths[:s]) for s in steps}
    table(["merge by", "shards", "outcomes", "shard files", "merge, s", "CPU, s", "peak, MiB",
           "vs before (s, CPU)", "growth, MiB a shard", "growth, s a shard"],
          _rows(found, steps, trees, args.cases, sizes))  # fmt: skip
    footer()


def _name(tree: Path | None) -> str:
    return f"before ({tree})" if tree else "this tree"


def _median(peaks: list[Peak]) -> Peak:
    return Peak(*(statistics.median(getattr(p, k) for p in peaks) for k in ("mib", "wall", "cpu")))


def _rows(
    found: dict[tuple[int, Path | None], list[Peak]],
    steps: list[int],
    trees: list[Path | None],
    cases: int,
    sizes: dict[int, int],
) -> list[list[str]]:
    """A row a tree and step (medians), its ratio to the tree before, its growth a shard."""
    rows, last = [], {}
    for shards in steps:
        base = _median(found[(shards, trees[0])]) if len(trees) > 1 else None
        for tree in trees:
            peak = _median(found[(shards, tree)])
            ratio = "-"
            if base is not None and tree is None:
                ratio = f"{peak.wall / base.wall:.2f}x, {peak.cpu / base.cpu:.2f}x"
            growth = ["-", "-"]
            if tree in last:
                (a, pa) = last[tree]
                growth = [f"{(peak.mib - pa.mib) / (shards - a):.1f}",
                          f"{(peak.wall - pa.wall) / (shards - a):.2f}"]  # fmt: skip
            last[tree] = (shards, peak)
            rows.append([_name(tree), str(shards), f"{shards * cases * 3:,}",
                         f"{sizes[shards] / 1e6:.0f} MB", f"{peak.wall:.1f}", f"{peak.cpu:.1f}",
                         f"{peak.mib:.0f}", ratio, *growth])  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
