"""Refresh: `slam golden refresh` against a 300 ms reference, one call at a time and at the default.

    python bench/bench_refresh.py [--cases 200] [--rounds 1] [--latency-ms 300]

Issue 41's "slam golden refresh asked concurrently". The benches' suite (bench/_suite.py) is
recorded once from an instant reference, then refreshed (``pytest --slm-record=all``, what
``slam golden refresh`` runs) against a reference that answers in ``--latency-ms`` and serves any
number of requests at once, as a hosted API does; the candidate answers at once, so the wall is
the reference's. Arms, one after another in each round: (a) ``--slm-concurrency 1`` (one call at
a time, as every refresh was before); (b) the default (the reference's answers fetched ahead,
16 in flight). The reference server's own counts (``GET /fake/stats``) are printed with each arm:
the calls it got, how many distinct (each request asked once?) and the most it had in flight.
The golden files after (b) must be those after (a) (the answers are the same; a refresh keeps an
unchanged answer as it was): the bench says so, or stops.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import PYTHON, Sample, clean_env, fake_server, fake_stats, footer, header, run_timed
from _common import table as markdown_table
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
ARMS = {"one at a time (--slm-concurrency 1)": ["--slm-concurrency", "1"], "default": []}


def goldens(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted((root / "__slam__").rglob("*.json"))}  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="Cases (one reference call each)")
    parser.add_argument("--rounds", type=int, default=1, help="Rounds of both arms")
    parser.add_argument("--latency-ms", type=float, default=300.0, help="The reference's latency")
    args = parser.parse_args(argv)
    header("Refresh: the reference asked concurrently", "python bench/bench_refresh.py "
           + " ".join(argv))  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="slam-bench-refresh-"))
    env = clean_env(BENCH_CASES=str(args.cases))
    walls: dict[str, list[float]] = {arm: [] for arm in ARMS}
    cpus: dict[str, list[float]] = {arm: [] for arm in ARMS}
    served: dict[str, str] = {}
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as instant, \
                fake_server(args.latency_ms, REFERENCE_ANSWER) as slow:  # fmt: skip
            write_suite(root, candidate, instant)
            run_timed([*PYTEST, "--slm-record=new"], root, env)
            recorded = goldens(root)
            write_suite(root, candidate, slow)  # the same goldens (one reference name), now slow
            for _ in range(args.rounds):
                for arm, flags in ARMS.items():
                    fake_stats(slow, reset=True)
                    t = run_timed([*PYTEST, "--slm-record=all", *flags], root, env)
                    walls[arm].append(t.wall)
                    cpus[arm].append(t.cpu)
                    s = fake_stats(slow)
                    served[arm] = (f"{s['chat_requests']} calls ({s['distinct_chat_bodies']} "
                                   f"distinct), peak {s['peak_in_flight']} in flight")  # fmt: skip
                    if goldens(root) != recorded:
                        raise SystemExit(f"bench: the golden files changed after {arm!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"### {args.cases} cases, a {args.latency_ms:.0f} ms reference; median (min-max) of "
          f"{args.rounds} round(s)\n")  # fmt: skip
    rows = [[arm, Sample(walls[arm]).show(), Sample(cpus[arm]).show(), served[arm]]
            for arm in ARMS]  # fmt: skip
    markdown_table(["refresh", "wall (s)", "CPU (s)", "the reference server saw"], rows)
    one, default = (walls[arm] for arm in ARMS)
    ratio = statistics.median(d / o for d, o in zip(default, one, strict=True))
    print(f"\ndefault / one at a time: {ratio:.2f}x; golden files the same after every arm")
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
