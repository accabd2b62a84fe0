"""A run's judge pairs asked ahead: the suite with every pair sent to a 300 ms judge.

    python bench/bench_judge_ahead.py [--cases 200] [--rounds 1] [--latency-ms 300]
                                      [--judge-latency-ms 300] [--concurrency 16]

The benches' suite (bench/_suite.py) runs as whole ``python -m pytest`` processes against loopback
FakeOpenAI servers, each in its own process: a reference with no latency (the goldens are recorded
from it first, with no judge), a candidate and a judge each answering in ``--latency-ms`` and
``--judge-latency-ms`` and serving any number of requests at once. ``by = "judge"``: the judge
grades every pair (the candidate's answer is never the reference's). Replay mode, so no verdict
is ever cached and every arm asks the judge about every pair. Per round, one after another:

(a) before: candidates fetched ahead at ``--concurrency``, the judge asked by each test after it
    ran, one pair at a time (the judge's model table sets ``concurrency = 1``: the code path of
    the tree before judge-ahead);
(b) after: the judge at ``--concurrency`` too, its pairs asked as the fetched answers come;
(c) everything one at a time (``--slm-concurrency 1``), for scale;
(d) the ideal of (b): the two servers in a pipeline, cases x the slower latency / concurrency,
    plus the faster latency (the last pair's other step), plus the plugin's own start-up (an
    empty opted-in run measured in the same round).

Printed: wall and CPU per arm (median (min-max) over ``--rounds``), after / before per round, and
the judge server's own counts for each arm (calls, distinct bodies: each asked once?, peak in
flight). Every pytest run must pass.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import PYTHON, Sample, clean_env, fake_server, fake_stats, footer, header, run_timed
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--slm-report=report.json"]
JUDGE_ANSWER = "The answers agree on the facts. Rating: [[8]]"
JUDGED = """
[tool.slam]
candidates = ["{candidate}#small-model"]
reference = "{reference}#gpt-4"
paths = ["tests"]
judge = "grader"
equivalence = {{ by = "judge" }}

[tool.slam.models.grader]
base_url = "{judge}"
model = "judge-model"
{limit}
"""


def pyproject(root: Path, urls: dict[str, str], judge_concurrency: int | None) -> None:
    """The suite's project with every pair sent to the judge, at this judge concurrency."""
    text = (root / "pyproject.toml").read_text().split("[tool.slam]")[0]
    limit = f"concurrency = {judge_concurrency}" if judge_concurrency else ""
    (root / "pyproject.toml").write_text(text + JUDGED.format(limit=limit, **urls))


def one(
    root: Path, cases: int, flags: list[str], judge: str
) -> tuple[float, float, dict[str, int]]:
    fake_stats(judge, reset=True)
    t = run_timed([*PYTEST, *flags], root, clean_env(BENCH_CASES=str(cases)))
    return t.wall, t.cpu, fake_stats(judge)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--judge-latency-ms", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, default=16, help="the endpoint default")
    args = parser.parse_args(argv)
    header("A run's judge pairs asked ahead", "python bench/bench_judge_ahead.py " + " ".join(argv))
    root = Path(tempfile.mkdtemp(prefix="slam-bench-judge-ahead-"))
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    stats: dict[str, dict[str, int]] = {}
    try:
        with (
            fake_server(args.latency_ms, CANDIDATE_ANSWER, "small-model") as candidate,
            fake_server(answer=REFERENCE_ANSWER) as reference,
            fake_server(answer=CANDIDATE_ANSWER, model="small-model") as instant,
            fake_server(args.judge_latency_ms, JUDGE_ANSWER, "judge-model") as judge,
        ):
            write_suite(root, candidate, reference)
            record = [f"--slm-models={instant}#small-model", "--slm-record=new"]
            run_timed([*PYTEST, *record], root, clean_env(BENCH_CASES=str(args.cases)))
            urls = {"candidate": candidate, "reference": reference, "judge": judge}
            arms = {
                "(a) before: judge one pair at a time": (1, []),
                "(b) after: judge pairs asked ahead": (None, []),
                "(c) everything one at a time": (None, ["--slm-concurrency", "1"]),
            }
            for _ in range(args.rounds):
                for name, (limit, flags) in arms.items():
                    pyproject(root, urls, limit)
                    wall, cpu, seen = one(root, args.cases, flags, judge)
                    walls.setdefault(name, []).append(wall)
                    cpus.setdefault(name, []).append(cpu)
                    stats[name] = seen
                t = run_timed(PYTEST, root, clean_env(BENCH_CASES="0"), ok=(0, 5))
                walls.setdefault("start-up", []).append(t.wall)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"### {args.cases} cases, a {args.latency_ms:.0f} ms candidate and a "
          f"{args.judge_latency_ms:.0f} ms judge, every pair to the judge; "
          f"{args.rounds} round(s)\n")  # fmt: skip
    print("| arm | wall (s) | CPU (s) | judge server: calls (distinct), peak in flight |")
    print("|---|---|---|---|")
    for name in arms:
        s = stats[name]
        seen = f"{s['chat_requests']} ({s['distinct_chat_bodies']}), peak {s['peak_in_flight']}"
        print(f"| {name} | {Sample(walls[name]).show()} | {Sample(cpus[name]).show()} | {seen} |")
    before_arm, after_arm, _ = arms
    before, after = walls[before_arm], walls[after_arm]
    ratio = statistics.median(a / b for a, b in zip(after, before, strict=True))
    slow, fast = sorted((args.latency_ms / 1000, args.judge_latency_ms / 1000), reverse=True)
    ideal = [args.cases * slow / args.concurrency + fast + s for s in walls["start-up"]]
    to_ideal = statistics.median(a / i for a, i in zip(after, ideal, strict=True))
    print(f"\n- after / before: **{ratio:.2f}x** ({1 / ratio:.1f} times as fast)")
    print(f"- after / the ideal ({args.cases} x {slow:g} s / {args.concurrency} + {fast:g} s + "
          f"start-up "
          f"{Sample(walls['start-up']).show()} s): {to_ideal:.2f}x")  # fmt: skip
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
