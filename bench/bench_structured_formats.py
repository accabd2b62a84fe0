"""How many tokens the same JSON takes written another way: the evidence for the structured cap
(swap/chat.py ``structured_cap``).

    python bench/bench_structured_formats.py [--data ../shared/data] [--no-engine]

Real structured answers: GPT-4's JSON answers in the shared MT-Bench sets (the JSON part of the
answer), the example product's curated triage JSON (examples/support_triage) and the issue's
sentiment object. Each is re-serialized the ways a model writes the same JSON (compact, the json
module's default spacing, indented by 2, 4 or a tab, keys sorted or reversed, non-ASCII escaped,
fenced in a ```json block) and counted with the project's token counter
(``metrics.tokens``): tiktoken's cl100k_base (GPT-4's tokenizer, what the reference's recorded
``completion_tokens`` counts) and SmolLM2-135M's own tokenizer through the embedded llama.cpp
engine's ``/tokenize`` (the candidate's count, what its cap limits). ``M`` is the reference's JSON
as it wrote it, counted with cl100k_base. Then the real answers of the other models to the same
MT-Bench questions (each one valid JSON, content of their own) against GPT-4's ``M``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, footer, header, table

from pytest_slam.metrics.tokens import llamacpp_count, openai_encoding
from pytest_slam.records import ModelSpec
from pytest_slam.swap.chat import STRUCTURED_FACTOR, STRUCTURED_MARGIN

FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
ISSUE_EXAMPLE = '{"sentiment": "positive", "confidence": 0.9}'
Counter = Callable[[str], int]


def json_part(text: str) -> tuple[object, str] | None:
    """The JSON object or array an answer carries (whole, or in a fence), with its text."""
    for chunk in [text.strip(), *(m.strip() for m in FENCE.findall(text))]:
        if chunk[:1] in "{[":
            try:
                value = json.loads(chunk)
            except ValueError:
                continue
            if isinstance(value, (dict, list)) and value:
                return value, chunk
    return None


def reordered(value: object, flip: bool) -> object:
    if isinstance(value, dict):
        items = list(value.items())
        items = items[::-1] if flip else sorted(items)
        return {k: reordered(v, flip) for k, v in items}
    if isinstance(value, list):
        return [reordered(v, flip) for v in value]
    return value


def variants(value: object) -> dict[str, str]:
    """The same JSON as models write it."""
    return {
        "compact": json.dumps(value, separators=(",", ":"), ensure_ascii=False),
        "spaced": json.dumps(value, ensure_ascii=False),
        "indent 2": json.dumps(value, indent=2, ensure_ascii=False),
        "indent 4": json.dumps(value, indent=4, ensure_ascii=False),
        "tab indent": json.dumps(value, indent="\t", ensure_ascii=False),
        "sorted keys, indent 2": json.dumps(reordered(value, False), indent=2, ensure_ascii=False),
        "reversed keys, indent 2": json.dumps(reordered(value, True), indent=2, ensure_ascii=False),
        "ascii-escaped, indent 2": json.dumps(value, indent=2),
        "fenced, indent 2": "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```",
    }


def mt_bench(data: Path) -> Iterator[tuple[str, str, list[str]]]:
    """(source, GPT-4's JSON answer, the other models' answers to the same question)."""
    pairs = data / "mt_bench_gpt4_vs_slm" / "records.jsonl"
    if pairs.exists():
        for line in pairs.read_text().splitlines():
            rec = json.loads(line)
            for turn, answer in enumerate(rec["gpt4_answer_turns"] or ()):
                others = [a[turn] for a in rec["other_answers"].values() if len(a) > turn]
                yield f"mt_bench q{rec['question_id']} turn {turn + 1}", answer, others
    graded = data / "mt_bench_gpt4_single_graded" / "records.jsonl"
    if graded.exists():
        for line in graded.read_text().splitlines():
            rec = json.loads(line)
            others = [c["answer"] for c in rec["candidates"].values()]
            yield f"mt_bench graded q{rec['question_id']}", rec["gpt4_answer"], others


def curated() -> Iterator[str]:
    path = ROOT / "examples/support_triage/__slam__/curated/tests/test_triage.json"
    for entry in json.loads(path.read_text())["entries"].values():
        for answer in entry["answers"]:
            yield answer["text"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--no-engine", action="store_true", help="cl100k_base only")
    args = parser.parse_args()
    header("The same JSON, written another way, in tokens",
           "python bench/bench_structured_formats.py")  # fmt: skip
    encoding, why = openai_encoding("gpt-4")
    if encoding is None:
        sys.exit(f"cl100k_base is needed: {why}")
    enc = encoding

    def gpt4(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    counters: dict[str, Counter] = {"cl100k_base": gpt4}
    server = None
    if not args.no_engine:
        from pytest_slam.swap.engines import start_engine
        from pytest_slam.swap.models import resolve

        spec: ModelSpec = resolve("smollm2-135m")
        server = start_engine(spec, None, 300)
        url = spec.base_urls[0]
        counters["SmolLM2"] = lambda text: llamacpp_count(text, url)
    try:
        refs: list[tuple[str, object, str, list[str]]] = []
        seen: dict[str, list[str]] = {}  # GPT-4's JSON -> every other model's answer to it
        for source, answer, others in mt_bench(args.data):
            found = json_part(answer)
            if found is not None and found[1] in seen:
                seen[found[1]].extend(others)  # the graded set repeats the pairs set's question
            elif found is not None:
                seen[found[1]] = list(others)
                refs.append((source, found[0], found[1], seen[found[1]]))
        for text in [*curated(), ISSUE_EXAMPLE]:
            found = json_part(text)
            if found is not None and found[1] not in seen:
                seen[found[1]] = []
                refs.append(("support_triage / issue 29", found[0], found[1], []))
        measure(refs, counters)
        other_models(refs, gpt4, counters)
        numbers(refs)
    finally:
        if server is not None:
            server.stop()
    footer()


def cap(m: int) -> int:
    return int(m * STRUCTURED_FACTOR + STRUCTURED_MARGIN)


def measure(refs: list[tuple[str, object, str, list[str]]], counters: dict[str, Counter]) -> None:
    """Per variant and tokenizer: the largest ratio to M and the largest excess over M."""
    rows: list[list[object]] = []
    worst: dict[str, float] = {}
    over = 0
    ms = [counters["cl100k_base"](text) for _, _, text, _ in refs]
    print(f"\n{len(refs)} reference JSON answers, M = {min(ms)} to {max(ms)} cl100k_base tokens "
          f"(median {sorted(ms)[len(ms) // 2]}); cap = {STRUCTURED_FACTOR:g} x M + "
          f"{STRUCTURED_MARGIN}\n")  # fmt: skip
    names = list(variants({}))
    for name in names:
        for tok, count in counters.items():
            ratios, excess, slack = [], [], []
            for (_, value, _, _), m in zip(refs, ms, strict=True):
                n = count(variants(value)[name])
                ratios.append(n / m)
                excess.append(n - m)
                slack.append(cap(m) - n)
                over += n > cap(m)
            worst[tok] = max(worst.get(tok, 0.0), max(ratios))
            rows.append([name, tok, f"{sorted(ratios)[len(ratios) // 2]:.2f}",
                         f"{max(ratios):.2f}", max(excess), min(slack)])  # fmt: skip
    table(["written as", "tokenizer", "median tokens / M", "max tokens / M", "max tokens - M",
           "least room under the cap"], rows)  # fmt: skip
    print(
        f"\n{over} of {len(refs) * len(names) * len(counters)} re-serializations over the cap; "
        + ", ".join(f"largest ratio {r:.2f} ({t})" for t, r in worst.items())
    )


def other_models(
    refs: list[tuple[str, object, str, list[str]]], gpt4: Counter, counters: dict[str, Counter]
) -> None:
    """Other models' own JSON answers to the same questions against GPT-4's M."""
    rows: list[list[object]] = []
    for tok, count in counters.items():
        ratios, cut = [], 0
        for _, _, text, answers in refs:
            m = gpt4(text)
            for answer in answers:
                found = json_part(answer)
                if found is None:
                    continue
                n = count(found[1])
                ratios.append(n / m)
                cut += n > cap(m)
        if ratios:
            ratios.sort()
            rows.append([tok, len(ratios), f"{ratios[len(ratios) // 2]:.2f}",
                         f"{ratios[int(len(ratios) * 0.9)]:.2f}", f"{ratios[-1]:.2f}", cut])  # fmt: skip
    print("\nOther models' own JSON answers to the same MT-Bench questions (their own content):\n")
    table(["tokenizer", "answers", "median / M", "p90 / M", "max / M", "over the cap"], rows)


def numbers(refs: list[tuple[str, object, str, list[str]]]) -> None:
    """Numbers at the same path in GPT-4's and the other models' JSON: equal, or how far apart
    (the evidence on a default ``tolerance`` for the json scorer)."""
    from pytest_slam.compare.jsontree import format_path, leaves

    def number(value: object) -> float | None:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else None  # type: ignore[arg-type]

    same, gaps = 0, []
    for source, value, _, answers in refs:
        ref = leaves(value)  # type: ignore[arg-type]
        for answer in answers:
            found = json_part(answer)
            cand = leaves(found[0]) if found is not None else {}  # type: ignore[arg-type]
            for path, r in ref.items():
                x, y = number(r), number(cand.get(path))
                if x is None or y is None:
                    continue
                if x == y:
                    same += 1
                else:
                    gaps.append((source, format_path(path), x, y))
    print(
        f"\nNumbers at the same path in the other models' JSON: {same} equal, {len(gaps)} differ\n"
    )
    rows = [[s, p, f"{x:g}", f"{y:g}", f"{abs(x - y):g}", f"{abs(x - y) / abs(x):.1%}"]
            for s, p, x, y in gaps]  # fmt: skip
    table(["question", "path", "GPT-4", "other model", "gap", "gap / GPT-4"], rows)


if __name__ == "__main__":
    main()
