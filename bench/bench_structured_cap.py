"""How long the embedded model's JSON and tool answers are, against a cap derived from a short
reference answer (issue 22's evidence; issue 29's structured cap, 3 x + 64, is measured by
bench_structured_formats.py, bench/README.md section 15).

    python bench/bench_structured_cap.py

Starts SmolLM2-135M (llama.cpp, CPU), sends each request once with only the model's ceiling
(``max_tokens_cap``, 1024) and notes the answer's length, its finish reason, whether it is whole
(JSON that parses, tool arguments that parse) and its time; then counts how many would have been cut
by the plain cap a 5-token reference answer gives (2 x 5 + 64 = 74 tokens). The cap sent is the
one ``generation_cap`` gives now (for a structured request, 3 x 5 + 64 = 79).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import footer, header

from pytest_slam.swap.chat import Target, forward_chat, generation_cap
from pytest_slam.swap.engines import start_engine
from pytest_slam.swap.models import resolve

SHORT_REFERENCE_TOKENS = 5
TOPICS = ("a refund request", "a password reset", "a late delivery", "a damaged parcel")
TOOL = {"type": "function", "function": {
    "name": "create_ticket", "description": "Open a support ticket",
    "parameters": {"type": "object", "required": ["topic", "priority"], "properties": {
        "topic": {"type": "string"}, "priority": {"type": "string"}}}}}  # fmt: skip


def requests() -> list[tuple[str, dict[str, object]]]:
    out: list[tuple[str, dict[str, object]]] = []
    for topic in TOPICS:
        msg = [{"role": "user", "content": f"Classify {topic} as JSON with keys topic, priority "
                                           "and next_steps (a list)."}]  # fmt: skip
        out.append(("json_object", {"model": "m", "messages": msg, "temperature": 0,
                                    "response_format": {"type": "json_object"}}))  # fmt: skip
        ask = [{"role": "user", "content": f"Open a ticket for {topic}."}]
        out.append(("tools", {"model": "m", "messages": ask, "temperature": 0, "tools": [TOOL]}))
    return out


def whole(kind: str, text: str | None, tool_calls: list[dict[str, object]] | None) -> bool:
    try:
        if kind == "tools" and tool_calls:
            for tc in tool_calls:
                json.loads(str(tc["function"]["arguments"]))  # type: ignore[index]
            return True
        json.loads(text or "")
        return True
    except ValueError:
        return False


def main() -> None:
    header("Structured answers of the embedded model against a derived cap",
           "python bench/bench_structured_cap.py")  # fmt: skip
    spec = resolve("smollm2-135m")
    server = start_engine(spec, None, 120)
    try:
        target = Target(spec, spec.base_urls[0], None)
        derived = 2 * SHORT_REFERENCE_TOKENS + 64
        rows, cut = [], 0
        print("| request | cap sent | completion tokens | finish | whole | seconds |")
        print("|---|---|---|---|---|---|")
        for kind, body in requests():
            cap = generation_cap(body, spec, SHORT_REFERENCE_TOKENS)
            start = time.perf_counter()
            call = forward_chat(target, body, cap=cap).call
            took = time.perf_counter() - start
            tokens = call.completion_tokens or 0
            cut += tokens > derived
            rows.append((kind, cap, tokens, call.finish_reason,
                         whole(kind, call.text, call.tool_calls), f"{took:.1f}"))  # fmt: skip
            print("| " + " | ".join(map(str, rows[-1])) + " |", flush=True)  # a slow run shows
        lengths = sorted(r[2] for r in rows)
        print(f"\nlongest {lengths[-1]} tokens, median {lengths[len(lengths) // 2]}; "
              f"{cut} of {len(rows)} answers are longer than the derived cap of {derived} "
              "tokens a 5-token reference answer would give, so it would have cut them.")  # fmt: skip
    finally:
        server.stop()
    footer()


if __name__ == "__main__":
    main()
