"""Products fetched ahead: a 4-calls-a-test label classifier and a 3-turn conversation against a
300 ms candidate, before and after the planner read dependence from the request's structure.

    python bench/bench_products.py --before OTHER_TREE [--cases 100] [--latency-ms 300]

Issue 49 item 3 and its bench (e). Each product is a suite of ``--cases`` tests recorded once
against an instant reference and candidate (FakeOpenAI, in this process: its answers follow the
request), then replayed with the candidate answering in ``--latency-ms``, serving any number of
requests at once (a hosted API), by whole ``python -m pytest`` processes:

- the classifier: each test asks for 4 reviews' labels; every prompt says "positive, negative, or
  neutral" and every answer is one of them (the held-out product of issue 49);
- the conversation: each test asks 3 turns, each carrying the candidate's earlier answers.

Arms, per product: ``before`` (the tree given by ``--before``, e.g. a checkout of main, imported by
``PYTHONPATH``) and ``after`` (this tree), at the default concurrency (16). Printed per arm: the
wall, the calls fetched ahead of their test / all calls (the JSON report's ``fetched_ahead``), and
the candidate server's own counts (calls, distinct bodies: each asked once?, the most in flight).
The ideal: the same run against an instant candidate (the plugin's own cost, this tree) plus the
server's time at 16 in flight (calls x latency / 16) or the longest chain of one test's dependent
calls (turns x latency), whichever is longer. Every pytest run must pass.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import PYTHON, ROOT, Timing, footer, header, ratio, run_timed, table, tree_env

from pytest_slam.testing import FakeOpenAI

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
CONCURRENCY = 16
CLASSIFIER = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm
client = OpenAI()
LABELS = "Classify the sentiment as positive, negative, or neutral. Answer with one word."

def classify(text):
    r = client.chat.completions.create(model="gpt-4", temperature=0, messages=[
        {"role": "system", "content": LABELS}, {"role": "user", "content": text}])
    return r.choices[0].message.content

@pytest.mark.parametrize("case", range(CASES))
def test_classify(case):
    got = [classify(f"case {case} review {j}: it broke after a week") for j in range(4)]
    assert all(label in ("positive", "negative", "neutral") for label in got)
"""
CONVERSATION = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm
client = OpenAI()

@pytest.mark.parametrize("case", range(CASES))
def test_chat(case):
    messages = [{"role": "system", "content": "You are a support assistant."}]
    for turn in range(3):
        messages.append({"role": "user", "content": f"case {case}: question {turn}"})
        r = client.chat.completions.create(model="gpt-4", messages=messages, temperature=0)
        messages.append({"role": "assistant", "content": r.choices[0].message.content})
    assert messages[-1]["content"]
"""
PRODUCTS = {"label classifier (4 calls a test)": (CLASSIFIER, 4, 1),
            "conversation (3 turns a test)": (CONVERSATION, 3, 3)}  # fmt: skip
LABELS = ("positive", "negative", "neutral")
NUMBERS = re.compile(r"case (\d+) review (\d+)")


def answer(req: dict[str, Any]) -> str:
    """A label for a review (positive or negative first: 8 characters, found in the prompt),
    else the conversation's echo."""
    last = req["messages"][-1]["content"]
    found = NUMBERS.search(last)
    if found:
        return LABELS[(int(found[1]) * 4 + int(found[2])) % 3]
    return "I can help with that: " + last


def project(root: Path, suite: str, cases: int, reference: str, candidate: str) -> None:
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "test_product.py").write_text(suite.replace("CASES", str(cases)))
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\n\n[tool.slam]\n'
        f'candidates = ["{candidate}#small-model"]\nreference = "{reference}#gpt-4"\n'
        'paths = ["tests"]\n'
    )


def fetched(report: Path) -> tuple[int, int]:
    """Calls fetched ahead of their test, and all calls, from the JSON report."""
    outcomes = json.loads(report.read_text(encoding="utf-8"))["outcomes"]
    calls = [c for o in outcomes for c in o["calls"]]
    return sum(bool(c["fetched_ahead"]) for c in calls), len(calls)


def arm(root: Path, tree: Path, candidate: FakeOpenAI) -> tuple[Timing, tuple[int, int], str]:
    candidate.requests.clear()
    candidate.peak_in_flight = 0
    t = run_timed([*PYTEST, "--slm-report=r.json"], root, tree_env(tree))
    bodies = [json.dumps(r.json, sort_keys=True) for r in candidate.requests if r.json]
    served = (f"{len(bodies)} calls ({len(set(bodies))} distinct), "
              f"peak {candidate.peak_in_flight} in flight")  # fmt: skip
    return t, fetched(root / "r.json"), served


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="The tree before (e.g. main)")
    parser.add_argument("--cases", type=int, default=100, help="Tests per product")
    parser.add_argument("--latency-ms", type=float, default=300.0, help="The candidate's latency")
    args = parser.parse_args(argv)
    header("Products fetched ahead: a label classifier and a conversation",
           "python bench/bench_products.py " + " ".join(argv))  # fmt: skip
    latency = args.latency_ms / 1000.0
    rows: list[list[object]] = []
    for name, (suite, calls, chain) in PRODUCTS.items():
        root = Path(tempfile.mkdtemp(prefix="slam-bench-products-"))
        try:
            with FakeOpenAI(answer) as reference, FakeOpenAI(answer, model="small-model") as cand:
                project(root, suite, args.cases, reference.base_url, cand.base_url)
                run_timed([*PYTEST, "--slm-record=new"], root, tree_env(ROOT))
                instant, _, _ = arm(root, ROOT, cand)
                cand.latency_s = latency
                total = args.cases * calls
                ideal = instant.wall + max(total * latency / CONCURRENCY, chain * latency)
                for label, tree in (("before", args.before.resolve()), ("after", ROOT)):
                    t, (ahead, every), served = arm(root, tree, cand)
                    rows.append([name, label, f"{ahead} / {every} ({ahead / every:.0%})",
                                 f"{t.wall:.1f}", f"{ideal:.1f}", ratio(t.wall, ideal),
                                 served])  # fmt: skip
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"### {args.cases} tests per product, a {args.latency_ms:.0f} ms candidate, "
          f"concurrency {CONCURRENCY}\n")  # fmt: skip
    table(["product", "tree", "fetched ahead / calls", "wall (s)", "ideal (s)", "wall / ideal",
           "the candidate server saw"], rows)  # fmt: skip
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
