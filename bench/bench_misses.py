"""A run whose golden answers are missing: what each failed test costs the run.

    python bench/bench_misses.py [--cases 200] [--repeats 3] [--before OTHER_TREE]

The benches' suite (bench/_suite.py) replays ``--cases`` tests against an empty golden folder, so
every test is refused before its candidate is asked and fails with one line naming the record
command; the same suite with every answer recorded is the baseline. The ratio is the misses' run
over the recorded run, median of ``--repeats`` interleaved pairs: what pytest-slam adds per failed
test (a one-line failure is reported without formatting the product's traceback through the SDK).
``--before OTHER_TREE`` (a folder holding another ``pytest_slam``) adds its misses arm.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import PYTHON, Sample, fake_server, footer, header, run_timed, table, tree_env, trees
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
FAILED = 1  # pytest's exit status when tests failed: what a run of misses ends with


def _env(tree: Path | None, cases: int) -> dict[str, str]:
    return tree_env(tree, BENCH_CASES=str(cases))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="Tests in the run")
    parser.add_argument("--repeats", type=int, default=3, help="Interleaved pairs")
    parser.add_argument("--before", type=Path, help="Another tree of the package to compare")
    args = parser.parse_args(argv)
    header("A run of missing golden answers", "python bench/bench_misses.py " + " ".join(argv))
    compared = trees(args.before)
    recorded, empty = (Path(tempfile.mkdtemp(prefix=f"slam-bench-{n}-")) for n in ("rec", "miss"))
    times: dict[str, dict[str, list[float]]] = {}
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            for root in (recorded, empty):
                write_suite(root, candidate, reference)
            run_timed([*PYTEST, "--slm-record=new"], recorded, _env(None, args.cases))
            for _ in range(args.repeats):
                arms = [("recorded", recorded, None, (0,))]
                arms += [(f"misses ({n})", empty, tree, (FAILED,)) for n, tree in compared.items()]
                for arm, root, tree, ok in arms:
                    t = run_timed(PYTEST, root, _env(tree, args.cases), ok=ok)
                    got = times.setdefault(arm, {"wall": [], "cpu": []})
                    got["wall"].append(t.wall)
                    got["cpu"].append(t.cpu)
    finally:
        for root in (recorded, empty):
            shutil.rmtree(root, ignore_errors=True)
    base = times["recorded"]
    rows = []
    for arm, got in times.items():
        ratio = "" if arm == "recorded" else "{:.2f}x / {:.2f}x".format(
            *(statistics.median(a / b for a, b in zip(got[k], base[k], strict=True))
              for k in ("wall", "cpu"))
        )  # fmt: skip
        per_test = (statistics.median(got["wall"]) - statistics.median(base["wall"])) / args.cases
        extra = "" if arm == "recorded" else f"{per_test * 1000:.1f} ms"
        rows.append([arm, Sample(got["wall"]).show(), Sample(got["cpu"]).show(), ratio, extra])
    table(["arm", "wall (s)", "CPU (s)", "vs recorded wall / CPU", "per failed test"], rows)
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
