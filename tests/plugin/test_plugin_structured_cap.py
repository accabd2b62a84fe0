"""The structured cap (issue 29): a JSON or tool request without its own limit gets a cap derived
from the reference's structured answer; a candidate that hits it has run away.

Real pytest runs (pytester) against loopback fakes: the reference answers a JSON object, one
candidate streams filler until its max_tokens (a runaway), another answers the same JSON written
another way. The rule's room for formatting is checked on real structured answers (the example
product's curated triage JSON, GPT-4's JSON answers in ../shared/data) with the project's token
counter: cl100k_base (GPT-4's tokenizer, what the reference's count is), and SmolLM2's own through
the real engine.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slam_helpers import SHARED_DATA, said

from pytest_slam.testing import FakeOpenAI
from pytest_slam.testing.fake_openai import count_tokens

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from bench_structured_formats import curated, json_part, mt_bench, variants  # noqa: E402
from report_helpers import read_report  # noqa: E402

SUITE = """
import json, openai, pytest

pytestmark = pytest.mark.slm
MSG = [{"role": "user", "content": "Classify as JSON: the parcel was late, support was great."}]

def test_classify():
    r = openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0,
                                                response_format={"type": "json_object"})
    assert json.loads(r.choices[0].message.content)["sentiment"] == "positive"
"""
REFERENCE = {"sentiment": "positive", "confidence": 0.9, "topics": ["delivery", "support"]}
REFERENCE_TEXT = json.dumps(REFERENCE)
FILLER = '{"sentiment": "positive", "notes": "' + "and so on " * 20_000  # never ends by itself


def reversed_keys(value: dict[str, Any]) -> dict[str, Any]:
    return dict(reversed(value.items()))


def outcomes(report: Path) -> dict[str, dict[str, Any]]:
    data = read_report(report)
    return {o["model"]: o for o in data["outcomes"]}


def test_a_runaway_json_answer_is_stopped_at_the_cap_and_named_the_candidates_failure(
    pytester: pytest.Pytester,
) -> None:
    """The filler candidate gets a cap well under the 1024 ceiling, from the reference's tokens,
    stops there, and the test names the runaway call; the pretty candidate (the same JSON indented,
    keys reversed) is never cut and passes, equivalent."""
    pytester.makepyfile(test_json=SUITE)
    pretty = json.dumps(reversed_keys(REFERENCE), indent=4)
    with (
        FakeOpenAI(REFERENCE_TEXT) as ref,
        FakeOpenAI(FILLER) as runaway,
        FakeOpenAI(pretty) as neat,
    ):
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        models = f"--slm-models={runaway.base_url}#runaway,{neat.base_url}#neat"
        result = pytester.runpytest(
            "-p", "no:cacheprovider", models, "--slm-record=new", "--slm-report=r.json"
        )  # fmt: skip
        sent = {"runaway": runaway.requests[0].json, "neat": neat.requests[0].json}
        asked = len(runaway.requests)
    reference_tokens = count_tokens(REFERENCE_TEXT)
    cap = 3 * reference_tokens + 64
    assert cap < 1024 / 4  # well under the ceiling
    assert sent["runaway"]["max_tokens"] == sent["neat"]["max_tokens"] == cap
    assert asked == 1  # the runaway is not retried
    result.assert_outcomes(passed=1, failed=1)
    by_model = outcomes(pytester.path / "r.json")
    ran = by_model["runaway"]
    call = ran["calls"][0]
    named = f"ran away: hit the structured cap {cap} derived from the reference's "
    named += f"{reference_tokens} tokens"
    assert call["error_kind"] == "runaway" and named in call["error"]
    assert call["completion_tokens"] == cap and call["finish_reason"] == "length"  # stopped there
    assert ran["outcome"] == "failed" and named in ran["message"]
    assert "call(s) to runaway failed (runaway 1)" in ran["message"]
    assert ran["message"].startswith(named)  # the reason first, where a row's cut shows it
    kept = by_model["neat"]
    assert kept["outcome"] == "passed" and kept["message"] is None
    assert not kept["calls"][0]["cut_by_cap"] and kept["calls"][0]["finish_reason"] == "stop"
    assert kept["pairs"][0]["scores"][0]["verdict"] == "equivalent"
    result.stdout.fnmatch_lines([f"*pytest-slam: {named}*raise [[]tool.slam[]] cap_factor*"])
    summary = said(result)
    assert "structured cap: the candidate ran away in 1 test(s) (test_json.py::test_classify" in (
        summary
    )
    assert "generation cap: the answers" not in summary  # a runaway, not a cut answer
    data = read_report(pytester.path / "r.json")
    row = next(r for r in data["models"] if r["model"] == "runaway")
    assert row["calls_errored"] == 1 and row["tests_failed"] == 1


@pytest.mark.parametrize(
    "written",
    [
        lambda v: json.dumps(v, separators=(",", ":")),
        lambda v: json.dumps(v, indent=2),
        lambda v: json.dumps(reversed_keys(v), indent="\t"),
    ],
    ids=["compact", "indent 2", "reversed keys, tabs"],
)
def test_the_products_own_json_written_another_way_is_never_cut(
    pytester: pytest.Pytester, written: Callable[[dict[str, Any]], str]
) -> None:
    """The example product's curated triage answers as the reference; the candidate answers the
    same JSON written another way, each under its cap, every call whole."""
    answers = [json.loads(t) for t in curated() if t.startswith("{")]
    tickets = [f"Ticket {i}: please help" for i in range(len(answers))]
    by_ticket = dict(zip(tickets, answers, strict=True))
    pytester.makepyfile(test_triage=f"""
import json, openai, pytest

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("ticket", {tickets!r})
def test_triage(ticket):
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": ticket}}], temperature=0,
        response_format={{"type": "json_object"}})
    assert json.loads(r.choices[0].message.content)["category"]
""")  # fmt: skip

    def reference(req: dict[str, Any]) -> str:
        return json.dumps(by_ticket[req["messages"][-1]["content"]])

    def candidate(req: dict[str, Any]) -> str:
        return written(by_ticket[req["messages"][-1]["content"]])

    with FakeOpenAI(reference) as ref, FakeOpenAI(candidate) as mini:
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
        caps = [r.json["max_tokens"] for r in mini.requests]
    result.assert_outcomes(passed=len(answers))
    assert len(answers) >= 3 and max(caps) < 1024  # every call had a derived cap
    data = read_report(pytester.path / "r.json")
    calls = [c for o in data["outcomes"] for c in o["calls"]]
    assert all(c["finish_reason"] == "stop" and not c["cut_by_cap"] for c in calls)


def real_json_answers() -> list[tuple[str, object]]:
    """Real reference JSON: the example product's curated answers, GPT-4's in ../shared/data."""
    found = [json_part(t) for t in curated()]
    if SHARED_DATA.is_dir():
        found += [json_part(answer) for _, answer, _ in mt_bench(SHARED_DATA)]
    return [(text, value) for value, text in (f for f in found if f is not None)]


# The curated answers' 27 variants always; with the shared data, GPT-4's MT-Bench JSON too.
MIN_CHECKED = 100 if SHARED_DATA.is_dir() else 27


def check_every_variant_fits(count: Callable[[str], int]) -> int:
    """Every re-serialization of every real answer, counted by ``count``, fits the cap its
    reference's cl100k_base count gives; the number checked."""
    from pytest_slam.metrics.tokens import openai_encoding
    from pytest_slam.swap.chat import generation_cap
    from pytest_slam.swap.models import resolve

    encoding, why = openai_encoding("gpt-4")
    assert encoding is not None, why
    spec = resolve("smollm2-135m")
    body = {"model": "gpt-4", "messages": [], "response_format": {"type": "json_object"}}
    checked = 0
    for text, value in real_json_answers():
        cap = generation_cap(body, spec, len(encoding.encode(text, disallowed_special=())))
        assert cap is not None
        for name, variant in variants(value).items():
            assert count(variant) <= cap, f"{name} of {text[:60]!r} is over its cap {cap}"
            checked += 1
    return checked


def test_the_cap_has_room_for_any_formatting_of_real_json_in_gpt4s_tokens() -> None:
    from pytest_slam.metrics.tokens import openai_encoding

    encoding, why = openai_encoding("gpt-4")
    assert encoding is not None, why
    enc = encoding
    assert (
        check_every_variant_fits(lambda t: len(enc.encode(t, disallowed_special=()))) >= MIN_CHECKED
    )


@pytest.mark.engine
def test_the_cap_has_room_for_any_formatting_of_real_json_in_smollm2s_tokens(
    smollm2_url: str,
) -> None:
    from pytest_slam.metrics.tokens import llamacpp_count

    assert check_every_variant_fits(lambda t: llamacpp_count(t, smollm2_url)) >= MIN_CHECKED


def test_a_tool_call_cut_at_its_derived_cap_ran_away_and_one_at_the_ceiling_was_cut() -> None:
    from pytest_slam.records import Call
    from pytest_slam.swap.chat import runaway
    from pytest_slam.swap.models import resolve

    spec = resolve("smollm2-135m")
    tools = {"tools": [{"type": "function", "function": {"name": "f"}}], "messages": []}

    def cut(cap: int) -> Call:
        return Call("smol", "candidate", tools, finish_reason="length", capped=True, cap=cap)

    derived, ceiling = cut(94), cut(spec.max_tokens_cap)
    assert runaway(derived, tools, spec, 10) and derived.error_kind == "runaway"
    assert "hit the structured cap 94 derived from the reference's 10 tokens" in str(derived.error)
    assert not runaway(ceiling, tools, spec, 10) and ceiling.ok  # the ceiling's cut stays a cut
    plain = cut(94)
    assert not runaway(plain, {"messages": []}, spec, 10) and plain.ok  # text: a cut answer


TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "delivery", "account", "other"]},
        "priority": {"enum": ["low", "medium", "high"]},
        "summary": {"type": "string"},
        "next_steps": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["category", "priority", "summary", "next_steps"],
}
SCHEMA_SUITE = f"""
import json, openai, pytest

pytestmark = [pytest.mark.slm, pytest.mark.slm_equivalence(by="fuzzy", at_least=0.0)]
FORMAT = {{"type": "json_schema", "json_schema": {{"name": "Ticket", "schema": {TICKET_SCHEMA!r}}}}}

def test_ticket():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": "Triage: my parcel is late"}}],
        response_format=FORMAT)
    assert json.loads(r.choices[0].message.content)["category"] == "delivery"
"""
WHOLE_TICKET = json.dumps(
    {
        "category": "delivery",
        "priority": "medium",
        "summary": "The customer's parcel has not arrived by the promised date and they ask why",
        "next_steps": [
            "check the carrier's tracking for the parcel",
            "tell the customer the new delivery date",
            "offer a refund of the shipping fee if it is later than three days",
        ],
    },
    indent=2,
)


def test_a_short_non_json_reference_does_not_cap_a_whole_answer_of_the_requests_schema(
    pytester: pytest.Pytester,
) -> None:
    """The reference answered one word (not JSON): 3 x 1 + 64 is less than a whole answer of the
    request's own schema needs. The cap is at least that, so the candidate's whole ticket comes
    back whole and the test passes, instead of a "runaway"."""
    pytester.makepyfile(test_ticket=SCHEMA_SUITE)
    assert count_tokens(WHOLE_TICKET) > 3 * count_tokens("delivery") + 64  # the old cap cut it
    with FakeOpenAI("delivery") as ref, FakeOpenAI(WHOLE_TICKET) as mini:
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
        sent = mini.requests[0].json
    result.assert_outcomes(passed=1)
    assert count_tokens(WHOLE_TICKET) <= sent["max_tokens"] < 1024
    call = outcomes(pytester.path / "r.json")["mini"]["calls"][0]
    assert call["finish_reason"] == "stop" and call["error_kind"] is None


def test_a_cut_answer_that_is_whole_json_valid_for_the_requests_schema_is_no_runaway() -> None:
    from pytest_slam.records import Call
    from pytest_slam.swap.chat import runaway
    from pytest_slam.swap.models import resolve

    spec = resolve("smollm2-135m")
    body = {"messages": [], "response_format": {"type": "json_schema",
            "json_schema": {"name": "Ticket", "schema": TICKET_SCHEMA}}}  # fmt: skip

    def cut(text: str) -> Call:
        return Call("smol", "candidate", body, text, "length", capped=True, cap=94)

    whole = cut(WHOLE_TICKET)
    assert not runaway(whole, body, spec, 1) and whole.ok  # whole and valid: an answer
    invalid = cut(json.dumps({"category": "parcel"}))  # whole JSON, but not the schema's
    assert runaway(invalid, body, spec, 1)
    half = cut(WHOLE_TICKET[:60])
    assert runaway(half, body, spec, 1) and half.error_kind == "runaway"
    assert "reference's shape" not in str(half.error)  # the reference ("delivery") is no JSON
    assert "the answer is still not whole JSON" in str(half.error)


def test_the_schema_floor_counts_fields_refs_and_tools() -> None:
    from pytest_slam.swap.chat import schema_floor

    fmt = {"type": "json_schema", "json_schema": {"name": "Ticket", "schema": TICKET_SCHEMA}}
    floor = schema_floor({"response_format": fmt})
    assert floor is not None and floor > 3 * count_tokens(WHOLE_TICKET) // 2
    nested = {"$defs": {"T": TICKET_SCHEMA}, "type": "object",
              "properties": {"ticket": {"$ref": "#/$defs/T"}}}  # fmt: skip
    by_ref = schema_floor({"response_format": {"type": "json_schema",
                                               "json_schema": {"schema": nested}}})  # fmt: skip
    assert by_ref is not None and by_ref > floor  # pydantic's $defs are followed
    tool = {"type": "function", "function": {"name": "open_ticket", "parameters": TICKET_SCHEMA}}
    by_tool = schema_floor({"tools": [tool]})
    assert by_tool is not None and by_tool > floor  # the call's own frame on top
    assert schema_floor({"response_format": {"type": "json_object"}}) is None


MIXED_SUITE = (
    SUITE
    + """
def test_text():
    openai.OpenAI().chat.completions.create(model="gpt-4", temperature=0, messages=[
        {"role": "user", "content": "Say hello"}])
"""
)


def test_a_runaway_counts_in_latency_and_cost_and_beside_the_mean_equivalence(
    pytester: pytest.Pytester,
) -> None:
    """A candidate whose JSON call ran away and whose text call answered: the runaway's time is in
    the latency (2 samples, not 1), its tokens in the cost, and the equivalence column says 1 of
    its 2 calls ran away instead of showing the one scored answer's mean alone."""
    pytester.makepyfile(test_json=MIXED_SUITE)

    def candidate(req: dict[str, Any]) -> str:
        return FILLER if req.get("response_format") else "GPT-4 says hello"

    with FakeOpenAI(REFERENCE_TEXT) as ref, FakeOpenAI(candidate) as mini:
        # alone_first = 0: every call is a latency sample (none is sent alone to stand for them)
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
alone_first = 0

[tool.slam.prices]
mini = {{ input_per_mtok = 1, output_per_mtok = 2 }}
""")  # fmt: skip
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    data = read_report(pytester.path / "r.json")
    row = next(r for r in data["models"] if r["model"] == "mini")
    ran = next(c for o in data["outcomes"] for c in o["calls"] if c["error_kind"] == "runaway")
    assert ran["cost_usd"] is not None and ran["cost_usd"] > 0  # its tokens were paid for
    assert row["calls_runaway"] == 1 and row["calls_errored"] == 1
    assert row["latency_samples"] == 2 and row["e2e_p95_ms"] is not None
    costs = [
        c["cost_usd"] for o in data["outcomes"] for c in o["calls"] if c["role"] == "candidate"
    ]
    assert row["cost_per_call_usd"] == pytest.approx(sum(costs) / 2)  # both calls, not one
    result.stdout.fnmatch_lines(["*mini*(1r/2)*", "equiv (Nr Nf/calls): *"])


FLAKY_FIRST = """
import openai, pytest

pytestmark = pytest.mark.slm

def test_flaky():  # its first call fails (HTTP 500); the SDK's retry is answered
    openai.OpenAI().chat.completions.create(model="gpt-4", temperature=0, messages=[
        {"role": "user", "content": "Say hi"}])
""" + MIXED_SUITE.split("pytestmark = pytest.mark.slm", 1)[1]


def test_the_terminal_equivalence_column_names_failed_calls_beside_runaways_at_80_columns(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A candidate with a runaway and a failed call: at 80 columns the terminal's mean carries
    both, as the Markdown and HTML tables do in words (the old cell named the runaways alone, and
    the "calls err" column is the first dropped on a narrow terminal), with its legend."""
    columns = 80
    monkeypatch.setenv("COLUMNS", str(columns))
    pytester.makepyfile(test_json="import json\n" + FLAKY_FIRST)

    def candidate(req: dict[str, Any]) -> str:
        return FILLER if req.get("response_format") else "GPT-4 says hello"

    with FakeOpenAI(REFERENCE_TEXT) as ref, FakeOpenAI(candidate, fail=[500]) as mini:
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
    data = read_report(pytester.path / "r.json")
    row = next(r for r in data["models"] if r["model"] == "mini")
    assert (row["calls"], row["calls_runaway"], row["calls_errored"]) == (4, 1, 2)
    lines = result.stdout.lines
    table = lines[lines.index("pytest-slam swap verdict: 1 model(s) vs gpt-4") :][:6]
    assert table[1].split()[:4] == ["model", "gate", "tests", "equiv"], table
    assert re.match(r"mini .* \d\.\d\d \(1r 1f/4\)  ", table[3]), table
    assert max(map(len, table)) <= columns
    assert table[5].startswith("equiv (Nr Nf/calls): of the model's calls, N ran away (r) and N")
