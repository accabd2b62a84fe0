"""The HTML report's build at size (issue 53: <= 1 s at 10,000 cases): ``python bench/bench_html.py
[--cases 1000,10000] [--repeats 4] [--rounds 2] [--before OTHER_TREE]``.

Each size is a run of the benches' suite as its records (``bench/_suite.py``: one candidate, the
product's request, the candidate's and the reference's fixed answers, a fuzzy score), built in a
process of its own with its verdict; the bench times ``render_html`` there (the page as a string:
what ``write_html`` writes), ``--repeats`` times a process: the first apart (the imports and the
template's compile a run pays once), the median of the others, in wall time and in the process's
own CPU time (``time.process_time``: what a loaded machine inflates least). A second shape gives every case
answers of its own (``--distinct``: prose as ``html_size.py`` writes it, so no diff repeats).
With ``--before``, the other tree runs the same in turn, ``--rounds`` times each, interleaved;
each figure is the median over all its samples (min-max), the ratio against the before tree's,
and whether the two trees wrote the same page (its SHA-256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

from _common import Sample, child_result, footer, header, ratio, sized_options, table, trees
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER

HERE = Path(__file__).resolve().parent
SYSTEM = "You triage support tickets. Answer with the category, the priority and the next step."


def outcomes(n: int, distinct: bool) -> list[dict[str, Any]]:
    """``n`` cases of the benches' suite as the run keeps them (``Outcome.as_dict``)."""
    from html_size import prose, vocabulary

    from pytest_slam.records import Call, Outcome, Pair, Score

    rng = random.Random(53)
    words = vocabulary(rng)
    zipf = [1 / (rank + 1) for rank in range(len(words))]
    out = []
    for i in range(n):
        reference, text = REFERENCE_ANSWER, CANDIDATE_ANSWER
        if distinct:
            ref = prose(rng, words, zipf, rng.randint(15, 60))
            cand = [rng.choice(words) if rng.random() < 0.25 else w for w in ref]
            reference, text = " ".join(ref) + ".", " ".join(cand) + "."
        key = hashlib.sha256(f"ticket {i}".encode()).hexdigest()
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Ticket {i}: I was charged twice for my plan."}]  # fmt: skip
        request = {"model": "gpt-4", "messages": messages, "max_tokens": 64, "temperature": 0}
        call = Call(model="small-model", role="candidate", request=request, text=text,
                    prompt_tokens=39, completion_tokens=17, ttft_ms=rng.uniform(1, 4),
                    e2e_ms=rng.uniform(2, 6), key=key, response_model="small-model",
                    finish_reason="stop", system_fingerprint="fp_fake")  # fmt: skip
        pair = Pair(call_index=0, key=key, golden_file="__slam__/tests/test_suite.py.json",
                    reference_text=reference, reference_model="gpt-4-0613",
                    scores=[Score("fuzzy", 0.8)])  # fmt: skip
        test = f"tests/test_suite.py::test_case[{i}]"
        out.append(Outcome(nodeid=f"{test[:-1]}-small-model]", test=test, model="small-model",
                           outcome="passed", duration_s=0.003, calls=[call],
                           pairs=[pair]).as_dict())  # fmt: skip
    return out


def child(n: int, distinct: bool, repeats: int) -> None:
    """In the tree under test: build the run, then time ``render_html``; one JSON line out."""
    from pytest_slam.records import ModelSpec, Outcome
    from pytest_slam.report.aggregate import RunInfo, aggregate
    from pytest_slam.report.html import render_html

    records = outcomes(n, distinct)
    info = RunInfo(models=[ModelSpec("small-model", "openai", "small-model")],
                   reference="gpt-4", started="2026-12-07T09:00:00+00:00",
                   finished="2026-12-07T09:10:00+00:00", pytest_version="9.0.3",
                   plugin_version="0.1.0")  # fmt: skip
    verdict = aggregate(records, info)
    kept = [Outcome.from_dict(o) for o in records]
    seconds, cpu, page = [], [], ""
    for _ in range(repeats):
        start, used = time.perf_counter(), time.process_time()
        page = render_html(verdict, kept)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)
    digest = hashlib.sha256(page.encode("utf-8", "surrogatepass")).hexdigest()
    print(json.dumps({"seconds": seconds, "cpu": cpu, "sha": digest, "bytes": len(page.encode())}))


def measure(tree: Path | None, n: int, distinct: bool, repeats: int) -> dict[str, Any]:
    args = ["--child", str(n), "--repeats", str(repeats), *(["--distinct"] if distinct else [])]
    return child_result(HERE / "bench_html.py", args, tree, n)


def main() -> None:
    parser = argparse.ArgumentParser()
    sized_options(parser)
    parser.add_argument("--distinct", action="store_true")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.distinct, args.repeats)
        return
    shape = "distinct answers" if args.distinct else "the suite's answers"
    before = f" --before {args.before}" if args.before else ""
    header(f"The HTML report's build at size ({shape})",
           f"python bench/bench_html.py --cases {args.cases} --repeats {args.repeats} "
           f"--rounds {args.rounds}{' --distinct' if args.distinct else ''}{before}")  # fmt: skip
    rows = []
    for n in (int(c) for c in args.cases.split(",")):
        samples = {name: Sample() for name in trees(args.before)}
        cpu = {name: Sample() for name in samples}
        first = {name: Sample() for name in samples}
        pages: dict[str, set[str]] = {name: set() for name in samples}
        size = 0
        for _ in range(args.rounds):
            for name, tree in trees(args.before).items():
                found = measure(tree, n, args.distinct, args.repeats)
                first[name].add(found["seconds"][0])
                for s in found["seconds"][1:]:
                    samples[name].add(s)
                for s in found["cpu"][1:]:
                    cpu[name].add(s)
                pages[name].add(found["sha"])
                size = found["bytes"] if name == "after" else size
        after = samples["after"]
        row = [f"{n:,}", after.show(), cpu["after"].show(), first["after"].show()]
        row.append(f"{size / 1e6:.2f} MB")
        if args.before is not None:
            base, cold, base_cpu = samples["before"], first["before"], cpu["before"]
            same = "yes" if pages["after"] == pages["before"] else "no"
            row += [base.show(), base_cpu.show(), ratio(cpu["after"].median, base_cpu.median)]
            row += [cold.show(), same]
        met = f"wall {'yes' if after.median <= 1.0 else 'no'}, CPU "
        met += "yes" if cpu["after"].median <= 1.0 else "no"
        row.append(met if n >= 10_000 else "-")
        rows.append(row)
    headers = ["cases", "render_html, s (median, min-max)", "CPU, s", "first in its process, s"]
    headers.append("page")
    if args.before is not None:
        headers += ["before, s", "before, CPU, s", "CPU after / before", "before, first, s"]
        headers.append("same page")
    table([*headers, "<= 1 s at 10,000"], rows)
    print(f"\n{args.rounds} rounds x {args.repeats} renders a tree and size, interleaved; the "
          "first render of each process (imports, the template compiled) apart")  # fmt: skip
    footer()


if __name__ == "__main__":
    main()
