"""The structured cap against a short, non-JSON reference (issue 44): what the embedded model's whole
answers of a request's own schema take, and whether the cap now leaves room for them.

    python bench/bench_schema_cap.py

Starts SmolLM2-135M (llama.cpp, CPU) and sends json_schema requests (the shapes LangChain
``with_structured_output``, instructor's JSON_SCHEMA mode and openai-agents ``output_type`` send,
pydantic's ``$defs`` included) and tool requests, each once with only a ceiling of
``CEILING`` tokens, as if the reference had answered in ``REFERENCE_TOKENS`` token (not JSON). For
each answer: its length, its finish reason, whether it is whole JSON valid for the request's schema
(``schemasize.complete``), and whether the cap before issue 44 (3 x 1 + 64 = 67) and the cap now
(``generation_cap``: never below ``schema_floor``) would have cut it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import footer, header

from pytest_slam.swap.chat import (
    STRUCTURED_FACTOR,
    STRUCTURED_MARGIN,
    Target,
    forward_chat,
    generation_cap,
    schema_floor,
)
from pytest_slam.swap.engines import start_engine
from pytest_slam.swap.models import resolve
from pytest_slam.swap.schemasize import complete

REFERENCE_TOKENS = 1  # "positive": a one-token, non-JSON reference answer
CEILING = 512
OLD_CAP = int(REFERENCE_TOKENS * STRUCTURED_FACTOR + STRUCTURED_MARGIN)
TOPICS = ("my parcel is two weeks late", "I was charged twice", "the app logs me out")
TICKET = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "delivery", "account", "other"]},
        "priority": {"enum": ["low", "medium", "high"]},
        "summary": {"type": "string"},
    },
    "required": ["category", "priority", "summary"],
}
SENTIMENT = {
    "type": "object",
    "properties": {"sentiment": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["sentiment", "confidence"],
}
NESTED = {  # as pydantic writes a model with a nested model
    "$defs": {"Step": {"type": "object", "properties": {"action": {"type": "string"},
                                                        "owner": {"type": "string"}},
                       "required": ["action", "owner"]}},
    "type": "object",
    "properties": {"topic": {"type": "string"},
                   "steps": {"type": "array", "items": {"$ref": "#/$defs/Step"}}},
    "required": ["topic", "steps"],
}  # fmt: skip


def requests() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for topic in TOPICS:
        for name, schema in (("ticket", TICKET), ("sentiment", SENTIMENT), ("nested", NESTED)):
            msg = [{"role": "user", "content": f"Answer as JSON ({name}): {topic}"}]
            fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
            out.append((name, {"model": "m", "messages": msg, "temperature": 0,
                               "response_format": fmt}))  # fmt: skip
        tool = {"type": "function", "function": {"name": "open_ticket", "parameters": TICKET}}
        ask = [{"role": "user", "content": f"Open a ticket: {topic}"}]
        out.append(("tool", {"model": "m", "messages": ask, "temperature": 0, "tools": [tool]}))
    return out


def main() -> None:
    header("The structured cap against a one-token, non-JSON reference",
           "python bench/bench_schema_cap.py")  # fmt: skip
    spec = resolve("smollm2-135m")
    server = start_engine(spec, None, 120)
    try:
        target = Target(spec, spec.base_urls[0], None)
        rows = []
        print("| request | tokens | finish | whole, valid | cap before | cut before | cap now "
              "| cut now | seconds |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for kind, body in requests():
            now = generation_cap(body, spec, REFERENCE_TOKENS) or CEILING
            start = time.perf_counter()
            call = forward_chat(target, body, cap=CEILING).call
            took = time.perf_counter() - start
            tokens = call.completion_tokens or 0
            whole = complete(body, call.text, call.tool_calls)
            row = (kind, tokens, call.finish_reason, whole, OLD_CAP, tokens > OLD_CAP, now,
                   tokens > now, f"{took:.1f}")  # fmt: skip
            rows.append(row)
            print("| " + " | ".join(map(str, row)) + " |", flush=True)
        answered = [r for r in rows if r[3]]
        print(f"\n{len(answered)} of {len(rows)} answers whole and valid; of those, "
              f"{sum(r[5] for r in answered)} longer than the cap before ({OLD_CAP}), "
              f"{sum(r[7] for r in answered)} longer than the cap now "
              f"(schema floors: {sorted({schema_floor(b) for _, b in requests()})}).")  # fmt: skip
    finally:
        server.stop()
    footer()


if __name__ == "__main__":
    main()
