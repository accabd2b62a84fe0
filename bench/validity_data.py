"""The labelled sets in ../shared/data as (prompt, candidate, reference, label) pairs, read in place.

One loader per per-answer set, each with the label its README gives (the repository's
``bench/validity.py`` and ``tests/compare/test_compare_bands_realdata.py`` share them):

- AlpacaEval: reference GPT-4 Turbo; acceptable when the GPT-4 Turbo judge prefers the small
  model's answer at least half the time (preference - 1 >= 0.5). Long open-ended answers.
- MT-Bench graded: reference GPT-4's answer (turn 1); acceptable when GPT-4 graded the answer
  7 or more of 10 (``GOOD_GRADE``). Long open-ended answers.
- EVOUNA-NQ: reference GPT-4's answer, on the proper questions whose GPT-4 answer people judged
  correct; candidates FiD, text-davinci-003, ChatGPT, Bing Chat; acceptable when people judged the
  candidate correct. Short QA.

``mt_bench_gpt4_vs_slm`` has no per-answer label, so it is not one of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from pytest_slam.compare.calibrate import GOOD_GRADE, LabelledPair

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def located(script: str) -> None:
    """``DATA`` from ``SLAM_SHARED_DATA`` when set; ``script`` exits with a line when it is absent."""
    global DATA
    if os.environ.get("SLAM_SHARED_DATA"):
        DATA = Path(os.environ["SLAM_SHARED_DATA"])
    if not DATA.is_dir():
        raise SystemExit(f"{script} needs the shared data at {DATA}")


def _records(folder: str) -> Iterator[dict]:
    with (DATA / folder / "records.jsonl").open(encoding="utf-8") as f:
        yield from map(json.loads, f)


def alpaca() -> list[LabelledPair]:
    out = []
    for rec in _records("alpaca_eval_gpt4_vs_slm"):
        for model, answer in rec["slm_outputs"].items():
            pref = rec["gpt4_turbo_judge_preference"].get(model)
            if answer is not None and pref is not None:
                label = int(pref - 1 >= 0.5)
                out.append(LabelledPair(f"alpaca-{rec['idx']}", answer, rec["gpt4_turbo_output"],
                                        label, pref - 1))  # fmt: skip
    return out


def mt_bench_graded() -> list[LabelledPair]:
    out = []
    for rec in _records("mt_bench_gpt4_single_graded"):
        for cand in rec["candidates"].values():
            grade = cand.get("grade")
            if grade is not None and cand.get("answer") is not None:
                label = int(grade >= GOOD_GRADE)
                unit = f"mt-{rec['question_id']}"
                out.append(
                    LabelledPair(unit, cand["answer"], rec["gpt4_answer"], label, grade / 10)
                )
    return out


def evouna_nq() -> list[LabelledPair]:
    out = []
    for rec in _records("evouna_nq_human_judged"):
        judged, answers = rec["human_judge"], rec["answers"]
        if rec["improper"] or judged.get("gpt4") is not True or not answers.get("gpt4"):
            continue
        for system in ("fid", "gpt35", "chatgpt", "newbing"):
            verdict, answer = judged.get(system), answers.get(system)
            if isinstance(verdict, bool) and answer:
                out.append(LabelledPair(f"nq-{rec['idx']}", answer, answers["gpt4"],
                                        int(verdict), float(verdict)))  # fmt: skip
    return out


def evouna_nq_gold() -> list[LabelledPair]:
    """EVOUNA-NQ with the dataset's gold short answer as the reference (a short golden answer, as
    a product's extraction test would keep): the five systems' answers as candidates, labelled by
    the people's verdict. The short-QA set of bench_domain.py."""
    out = []
    for rec in _records("evouna_nq_human_judged"):
        gold = rec.get("golden_answer")
        if rec["improper"] or not gold:
            continue
        for system in ("fid", "gpt35", "chatgpt", "gpt4", "newbing"):
            verdict, answer = rec["human_judge"].get(system), rec["answers"].get(system)
            if isinstance(verdict, bool) and answer:
                out.append(LabelledPair(f"nq-{rec['idx']}", answer, gold, int(verdict),
                                        float(verdict)))  # fmt: skip
    return out


SETS: dict[str, Callable[[], list[LabelledPair]]] = {
    "AlpacaEval": alpaca,
    "MT-Bench graded": mt_bench_graded,
    "EVOUNA-NQ": evouna_nq,
}
