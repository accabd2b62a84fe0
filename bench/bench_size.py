"""The plugin's cost at size: on/off at 400 and 2,000 cases, recording, promptfoo, the call's path.

    python bench/bench_size.py [--pairs 5] [--record-repeats 3] [--before OTHER_TREE]
                               [--promptfoo PATH] [--sizes 400,2000]

One loopback FakeOpenAI serves the candidate and another the reference (each in its own process),
and the benches' suite (bench/_suite.py: a product whose OpenAI client is built at import time,
one call per test) runs as whole ``python -m pytest`` processes:

1. **On/off.** The same cases with the plugin off (``-p no:slam``, the product straight to the
   server) and on (the swap, golden replay, the fuzzy scorer and the JSON report, as a CI gate
   runs it; the HTML report's once-per-run cost is measured by html_size.py), in interleaved
   pairs (off, on, [before], off, on, ...), each process's wall and CPU (user + system of the
   process and its threads, not the servers'). The ratio is on over off per pair, median of the
   pairs: a pair shares the machine's load of its moment. Target: <= 1.15x at every size.
2. **Recording.** ``--slm-record=all`` into an empty golden folder at each size (median of
   ``--record-repeats``); the largest against the smallest, target <= 6x for 5x the cases.
3. **promptfoo** on the same cases (same prompts, the same ``contains`` check, the same server),
   where it is installed: ``npm install --prefix /work/.promptfoo promptfoo``. Telemetry, update
   checks, sharing and remote generation are off, its cache is off and nothing is written to its
   folder (a temp ``PROMPTFOO_CONFIG_DIR``); its default concurrency (4) is kept, as a user gets
   it. The ratio is the plugin-on wall over promptfoo's, median of ``--pairs``; target <= 0.5x.
4. **The call's path**: the pytest_slam files and function calls (hops) from the product's
   ``client.chat.completions.create`` to the candidate and back, one warm replayed call (a run's
   second) traced with ``sys.setprofile`` (bench/_trace_call.py).

``--before OTHER_TREE`` (a folder holding another ``pytest_slam``) adds its on arm to every pair,
its recording and its trace, run with ``PYTHONPATH=OTHER_TREE``: a change's before and after in
the same run under the same load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import (
    PYTHON,
    Sample,
    fake_server,
    footer,
    header,
    run_timed,
    table,
    tree_env,
    trees,
)
from _promptfoo import PROMPTFOO, promptfoo_cmd, promptfoo_config, promptfoo_env
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

HERE = Path(__file__).resolve().parent
PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
ON_ARGS = ["--slm-report=report.json"]
TARGET_ON_OFF, TARGET_RECORD, TARGET_PROMPTFOO = 1.15, 6.0, 0.5


def trace(tree: Path | None, candidate: str, reference: str, out: Path) -> dict[str, object]:
    """Files (in first-reached order) and hops of one swapped call, in ``tree`` or this one."""
    env = tree_env(tree, BENCH_TRACE_OUT=str(out))
    run_timed([PYTHON, str(HERE / "_trace_call.py"), candidate, reference], HERE, env)
    hops = json.loads(out.read_text())
    package = next((Path(f).parent for f, _, _ in hops if f.endswith("__init__.py")), None)
    files: list[str] = []
    for filename, _, _ in hops:
        name = filename.split("pytest_slam/", 1)[-1]
        if name not in files:
            files.append(name)
    threads = len({t for _, _, t in hops})
    return {"files": files, "hops": len(hops), "threads": threads, "package": str(package)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="Interleaved on/off pairs per size")
    parser.add_argument("--record-repeats", type=int, default=3, help="Recording runs per size")
    parser.add_argument("--sizes", default="400,2000", help="Case counts, smallest first")
    parser.add_argument("--before", type=Path, help="Another tree of the package to compare")
    parser.add_argument("--promptfoo", default=PROMPTFOO, help="promptfoo's executable")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.sizes.split(",")]
    header("The plugin at size", "python bench/bench_size.py " + " ".join(argv))
    compared = trees(args.before)
    has_promptfoo = Path(args.promptfoo).exists()
    root = Path(tempfile.mkdtemp(prefix="slam-bench-size-"))
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            write_suite(root, candidate, reference)
            results = measure(root, candidate, reference, sizes, compared, args, has_promptfoo)
            traces = {name: trace(tree, candidate, reference, root / f"trace-{name}.json")
                      for name, tree in compared.items()}  # fmt: skip
        report(results, traces, sizes, args, has_promptfoo)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


def _env(tree: Path | None, cases: int, plugin: bool, candidate: str) -> dict[str, str]:
    direct = {} if plugin else {"OPENAI_BASE_URL": candidate, "OPENAI_API_KEY": "sk-bench"}
    return tree_env(tree, BENCH_CASES=str(cases), **direct)


def measure(
    root: Path,
    candidate: str,
    reference: str,
    sizes: list[int],
    compared: dict[str, Path | None],
    args: argparse.Namespace,
    has_promptfoo: bool,
) -> dict[str, dict[int, dict[str, list[float]]]]:
    """Every arm's wall and CPU per size: ``{arm: {cases: {"wall": [...], "cpu": [...]}}}``."""
    out: dict[str, dict[int, dict[str, list[float]]]] = {}

    def add(arm: str, cases: int, wall: float, cpu: float) -> None:
        got = out.setdefault(arm, {}).setdefault(cases, {"wall": [], "cpu": []})
        got["wall"].append(wall)
        got["cpu"].append(cpu)

    golden = root / "fixtures"
    for cases in sizes:  # recording first: it also leaves the goldens the replays read
        for name, tree in compared.items():
            for _ in range(args.record_repeats):
                shutil.rmtree(golden, ignore_errors=True)
                t = run_timed(
                    [*PYTEST, "--slm-record=all"], root, _env(tree, cases, True, candidate)
                )
                add(f"record {name}", cases, t.wall, t.cpu)
    shutil.rmtree(golden, ignore_errors=True)
    run_timed([*PYTEST, "--slm-record=new"], root, _env(None, max(sizes), True, candidate))
    pf_env = promptfoo_env(root / "promptfoo-home")
    for cases in sizes:
        config = promptfoo_config(root, candidate, cases)
        for _ in range(args.pairs):
            t = run_timed([*PYTEST, "-p", "no:slam"], root, _env(None, cases, False, candidate))
            add("off", cases, t.wall, t.cpu)
            for name, tree in compared.items():
                t = run_timed([*PYTEST, *ON_ARGS], root, _env(tree, cases, True, candidate))
                add(f"on {name}", cases, t.wall, t.cpu)
            if has_promptfoo and cases == sizes[0]:
                t = run_timed(promptfoo_cmd(args.promptfoo, config), root, pf_env)
                add("promptfoo", cases, t.wall, t.cpu)
    return out


def _pairwise(a: dict[str, list[float]], b: dict[str, list[float]], what: str) -> float:
    return statistics.median(x / y for x, y in zip(a[what], b[what], strict=False))


def report(
    results: dict[str, dict[int, dict[str, list[float]]]],
    traces: dict[str, dict[str, object]],
    sizes: list[int],
    args: argparse.Namespace,
    has_promptfoo: bool,
) -> None:
    names = list(traces)
    print(f"### 1. Plugin on/off, median of {args.pairs} interleaved pairs (ratio per pair)\n")
    rows = []
    for cases in sizes:
        off = results["off"][cases]
        rows.append([cases, "off", Sample(off["wall"]).show(), Sample(off["cpu"]).show(), "", ""])
        for name in names:
            on = results[f"on {name}"][cases]
            wall, cpu = _pairwise(on, off, "wall"), _pairwise(on, off, "cpu")
            met = "yes" if max(wall, cpu) <= TARGET_ON_OFF else "no"
            rows.append([cases, f"on ({name})", Sample(on["wall"]).show(), Sample(on["cpu"]).show(),
                         f"{wall:.2f}x / {cpu:.2f}x", f"<= {TARGET_ON_OFF}x: {met}"])  # fmt: skip
    table(["cases", "arm", "wall (s)", "CPU (s)", "on/off wall / CPU", "target"], rows)
    print(f"\n### 2. Recording (--slm-record=all, empty golden folder), median of "
          f"{args.record_repeats}\n")  # fmt: skip
    rows = []
    for name in names:
        rec = results[f"record {name}"]
        small, large = (
            statistics.median(rec[sizes[0]]["wall"]),
            statistics.median(rec[sizes[-1]]["wall"]),
        )
        growth = large / small
        met = "yes" if growth <= TARGET_RECORD else "no"
        rows.append([name, *(Sample(rec[n]["wall"]).show() for n in sizes),
                     f"{growth:.2f}x for {sizes[-1] / sizes[0]:.0f}x the cases",
                     f"<= {TARGET_RECORD:.0f}x: {met}"])  # fmt: skip
    table(["tree", *(f"{n} cases (s)" for n in sizes), "growth", "target"], rows)
    print(f"\n### 3. promptfoo on the same {sizes[0]} cases\n")
    if not has_promptfoo or "promptfoo" not in results:
        print(f"promptfoo: not installed at {args.promptfoo} "
              "(npm install --prefix /work/.promptfoo promptfoo); skipped")  # fmt: skip
    else:
        pf = results["promptfoo"][sizes[0]]
        rows = [["promptfoo eval (-j 4)", Sample(pf["wall"]).show(), Sample(pf["cpu"]).show(), ""]]
        for name in names:
            on = results[f"on {name}"][sizes[0]]
            wall = _pairwise(on, pf, "wall")
            met = "yes" if wall <= TARGET_PROMPTFOO else "no"
            rows.append([f"pytest-slam on ({name})", Sample(on["wall"]).show(),
                         Sample(on["cpu"]).show(),
                         f"{wall:.2f}x wall, {_pairwise(on, pf, 'cpu'):.2f}x CPU "
                         f"(<= {TARGET_PROMPTFOO}x wall: {met})"])  # fmt: skip
        table(["arm", "wall (s)", "CPU (s)", "vs promptfoo"], rows)
    print(
        "\n### 4. One warm replayed swapped call: from the product's client to the candidate and "
        "back\n"
    )
    table(
        ["tree", "pytest_slam files", "hops (function calls)", "threads"],
        [[n, len(t["files"]), t["hops"], t["threads"]] for n, t in traces.items()],
    )  # type: ignore[arg-type]
    for name, t in traces.items():
        print(f"\n{name}: " + " -> ".join(t["files"]))  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
