"""The broker of calls fetched ahead (issue 49): wall and CPU at 16 and 64 in flight, two trees.

    python bench/bench_broker.py --before OTHER_TREE [--cases 200] [--rounds 2]
                                 [--latency-ms 0,300] [--concurrency 16,64]

The benches' suite (bench/_suite.py: one call per test) replays its goldens against a loopback
FakeOpenAI candidate in its own process, at each ``--latency-ms`` (0: what the plugin itself
costs; 300: a hosted API that answers any number at once) and each ``--concurrency``
(``--slm-concurrency``), for this tree and ``--before``, interleaved round by round. Printed per
arm: the median wall and CPU of the pytest process (the servers' excluded), and what the server
saw (calls, distinct bodies: each request once?, the most in flight: never above N). The issue's
CPU targets: concurrency 64 <= 1.1x the CPU of 16.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import (
    PYTHON,
    Sample,
    fake_server,
    fake_stats,
    footer,
    header,
    run_timed,
    table,
    tree_env,
    trees,
)
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--slm-report=report.json"]


def numbers(text: str) -> list[int]:
    return [int(n) for n in text.split(",")]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="Another tree of the package to compare")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-ms", type=numbers, default=[0, 300])
    parser.add_argument("--concurrency", type=numbers, default=[16, 64])
    args = parser.parse_args(argv)
    header("The broker of calls fetched ahead", "python bench/bench_broker.py " + " ".join(argv))
    here = Path(__file__).resolve().parent.parent
    compared = {**trees(args.before), "after": here}  # this tree, whatever the venv installed
    rows = []
    for latency in args.latency_ms:
        root = Path(tempfile.mkdtemp(prefix="slam-bench-broker-"))
        try:
            with fake_server(latency, CANDIDATE_ANSWER, "small-model") as candidate, \
                    fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
                write_suite(root, candidate, reference)
                env = tree_env(here, BENCH_CASES=str(args.cases))
                run_timed([*PYTEST, "--slm-record=new", "--slm-concurrency", "1"], root, env)
                walls: dict[tuple[str, int], Sample] = {}
                cpus: dict[tuple[str, int], Sample] = {}
                seen: dict[tuple[str, int], dict[str, int]] = {}
                for _ in range(args.rounds):
                    for n in args.concurrency:
                        for name, tree in compared.items():
                            fake_stats(candidate, reset=True)
                            env = tree_env(tree, BENCH_CASES=str(args.cases))
                            timing = run_timed([*PYTEST, "--slm-concurrency", str(n)], root, env)
                            walls.setdefault((name, n), Sample()).add(timing.wall)
                            cpus.setdefault((name, n), Sample()).add(timing.cpu)
                            seen[(name, n)] = fake_stats(candidate)
                for (name, n), wall in walls.items():
                    s = seen[(name, n)]
                    server = (f"{s['chat_requests']} calls ({s['distinct_chat_bodies']} distinct), "
                              f"peak {s['peak_in_flight']}")  # fmt: skip
                    rows.append([f"{latency:g} ms", n, name, wall.show(), cpus[(name, n)].show(),
                                 server])  # fmt: skip
        finally:
            shutil.rmtree(root, ignore_errors=True)
    table(["candidate", "concurrency", "tree", "wall (s)", "CPU (s)", "the server saw"], rows)
    footer()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main(sys.argv[1:]))
