"""An asyncio product through the plugin: each call in memory, against the same calls over loopback.

    python bench/bench_async.py [--cases 400] [--pairs 5] [--before OTHER_TREE]

The benches' suite (bench/_suite.py) with its product written for ``AsyncOpenAI``: each test runs
``asyncio.run`` of one call, the client opened inside the coroutine, as tests of async code do.
The same cases run with the plugin off (``-p no:slam``, the product straight to a loopback
FakeOpenAI) and on (the swap, golden replay, the fuzzy scorer and the JSON report), in interleaved
pairs; ``--before`` adds the on arm of another tree of the package (``PYTHONPATH``), so a change's
before and after share each pair's load. Each process's wall and CPU (its threads included, not the
servers'); the ratio is on over off per pair, median of the pairs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import (
    PYTHON,
    Sample,
    Timing,
    clean_env,
    fake_server,
    footer,
    header,
    run_timed,
    table,
    tree_env,
    trees,
)
from _suite import ASYNC_PRODUCT, CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=400, help="Cases per run")
    parser.add_argument("--pairs", type=int, default=5, help="Interleaved pairs")
    parser.add_argument("--before", type=Path, help="Another tree of the package to compare")
    args = parser.parse_args(argv)
    header("An asyncio product through the plugin", "python bench/bench_async.py " + " ".join(argv))
    compared = trees(args.before)
    root = Path(tempfile.mkdtemp(prefix="slam-bench-async-"))
    runs: dict[str, dict[str, list[float]]] = {}
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            write_suite(root, candidate, reference)
            (root / "product.py").write_text(ASYNC_PRODUCT)
            cases = {"BENCH_CASES": str(args.cases)}
            run_timed([*PYTEST, "--slm-record=new"], root, clean_env(**cases))
            for _ in range(args.pairs):
                direct = {"OPENAI_BASE_URL": candidate, "OPENAI_API_KEY": "sk-bench"}
                _add(runs, "off", run_timed([*PYTEST, "-p", "no:slam"], root,
                                             clean_env(**cases, **direct)))  # fmt: skip
                for name, tree in compared.items():
                    env = tree_env(tree, **cases)
                    _add(runs, name, run_timed([*PYTEST, "--slm-report=report.json"], root, env))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    off = runs["off"]
    rows = [["off", Sample(off["wall"]).show(), Sample(off["cpu"]).show(), ""]]
    for name in compared:
        on = runs[name]
        wall = statistics.median(a / b for a, b in zip(on["wall"], off["wall"], strict=True))
        cpu = statistics.median(a / b for a, b in zip(on["cpu"], off["cpu"], strict=True))
        rows.append([f"on ({name})", Sample(on["wall"]).show(), Sample(on["cpu"]).show(),
                     f"{wall:.2f}x / {cpu:.2f}x"])  # fmt: skip
    print(f"### {args.cases} cases, median of {args.pairs} interleaved pairs\n")
    table(["arm", "wall (s)", "CPU (s)", "on/off wall / CPU"], rows)
    footer()
    return 0


def _add(runs: dict[str, dict[str, list[float]]], arm: str, timing: Timing) -> None:
    got = runs.setdefault(arm, {"wall": [], "cpu": []})
    got["wall"].append(timing.wall)
    got["cpu"].append(timing.cpu)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
