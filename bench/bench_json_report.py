"""The JSON report at size (issue 53: <= 1,500 bytes a case, written in <= 1 s at 10,000 cases):
``python bench/bench_json_report.py [--cases 1000,10000] [--repeats 4] [--rounds 2]
[--before OTHER_TREE]``.

Each size is the benches' suite as its records (``bench_html.outcomes``: one candidate call, its
golden pair and a fuzzy score a case), aggregated in a process of its own; the bench times
``write_json`` there (the streamed, sealed report as a CI run writes it) ``--repeats`` times, the
first apart, and ``load_report`` of the file once, and reads the file's bytes a case. With
``--before``, the other tree runs the same in turn, ``--rounds`` times each, interleaved; each
figure is the median of all its samples (min-max) and the ratio against the before tree's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Sample, child_result, footer, header, ratio, sized_options, table, trees

HERE = Path(__file__).resolve().parent
TARGET_BYTES, TARGET_S = 1500, 1.0


def child(n: int, repeats: int) -> None:
    """In the tree under test: the run's records, then ``write_json`` timed; one JSON line out."""
    from bench_html import outcomes

    from pytest_slam.records import ModelSpec, Outcome
    from pytest_slam.report.aggregate import RunInfo, aggregate
    from pytest_slam.report.jsonreport import load_report, write_json

    records = [Outcome.from_dict(o) for o in outcomes(n, distinct=False)]
    info = RunInfo(models=[ModelSpec("small-model", "openai", "small-model")], reference="gpt-4",
                   started="2026-12-07T09:00:00+00:00", finished="2026-12-07T09:10:00+00:00",
                   pytest_version="9.0.3", plugin_version="0.1.0")  # fmt: skip
    verdict = aggregate(records, info)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.json"
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            write_json(path, verdict, records)
            seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        load_report(path)
        loaded = time.perf_counter() - start
        size = path.stat().st_size
    print(json.dumps({"seconds": seconds, "load": loaded, "bytes": size}))


def measure(tree: Path | None, n: int, repeats: int) -> dict[str, Any]:
    args = ["--child", str(n), "--repeats", str(repeats)]
    return child_result(HERE / "bench_json_report.py", args, tree, n)


def main() -> None:
    parser = argparse.ArgumentParser()
    sized_options(parser)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.repeats)
        return
    before = f" --before {args.before}" if args.before else ""
    header("The JSON report at size", f"python bench/bench_json_report.py --cases {args.cases} "
           f"--repeats {args.repeats} --rounds {args.rounds}{before}")  # fmt: skip
    rows = []
    for n in (int(c) for c in args.cases.split(",")):
        write = {name: Sample() for name in trees(args.before)}
        load = {name: Sample() for name in write}
        size: dict[str, int] = {}
        for _ in range(args.rounds):
            for name, tree in trees(args.before).items():
                found = measure(tree, n, args.repeats)
                for s in found["seconds"][1:]:
                    write[name].add(s)
                load[name].add(found["load"])
                size[name] = found["bytes"]
        per_case = size["after"] / n
        row = [f"{n:,}", write["after"].show(), load["after"].show(), f"{per_case:,.0f}",
               "yes" if per_case <= TARGET_BYTES else "no"]  # fmt: skip
        if args.before is not None:
            row += [write["before"].show(), ratio(write["after"].median, write["before"].median),
                    f"{size['before'] / n:,.0f}"]  # fmt: skip
        row.append(("yes" if write["after"].median <= TARGET_S else "no") if n >= 10_000 else "-")
        rows.append(row)
    headers = ["cases", "write_json, s", "load_report, s", "bytes a case", "<= 1,500"]
    if args.before is not None:
        headers += ["before: write_json, s", "after / before", "before: bytes a case"]
    table([*headers, "written in <= 1 s at 10,000"], rows)
    print(f"\n{args.rounds} rounds x {args.repeats} writes a tree and size, interleaved; the first "
          "write of each process apart")  # fmt: skip
    footer()


if __name__ == "__main__":
    main()
