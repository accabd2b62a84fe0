"""The page's script derives each call's views as the Python build made them (``calls.js``).

The HTML report used to build, for every call, its transcript step, its tokens-and-time text and
its raw request and answer in Python (about 65 us of a row's 90 at 10,000 cases: issue 53). Its
line now carries the call as recorded and a few numbers, and the page's script derives those
views. Here node runs that script on lines the build writes and the build's former script on the
lines it wrote before (the reference: ``old_line`` and ``OLD_JS``, main a8934fd's, verbatim), over
generated calls made to find a port's slips (tool calls, multi-part contents, roles and ids of
every JSON type, non-ASCII, lone surrogates, bidi controls, huge and tied numbers, agents whose
history is kept, rewritten or cut) and real-shaped ones (the report tests' run, MT-Bench's
two-turn conversations): every call's step, facts text, raw request and raw answer must be the
same text. Needs node (the page's own engine is a browser's: the script uses nothing node has and
a browser lacks).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

from patience import patient
from slam_helpers import SHARED_DATA
from test_report_worddiff_js import NODE, needs_node

from pytest_slam.records import JSON, Call, Outcome, Pair
from pytest_slam.report import htmldata
from pytest_slam.report.htmlcalls import call_line, measured, shown_json

SCRIPT = Path(htmldata.__file__).parent / "templates" / "calls.js"

# main a8934fd's template: the raw request and answer put back together from the old line
OLD_JS = """
  function rawRequest(all, i) {
    var q = all[i][9][1], steps = all[i][8] || [], out = {};
    var before = q[0] >= 0 && all[q[0]][9] ? (rawRequest(all, q[0]).messages || []).slice(0, q[1]) : [];
    Object.keys(q[2]).forEach(function (k) { out[k] = q[2][k]; });
    if (Array.isArray(q[2].messages)) {
      out.messages = before.concat(q[2].messages.map(function (m) {
        if (!m || typeof m.content !== "number") { return m; }
        var copy = {};
        Object.keys(m).forEach(function (k) { copy[k] = k === "content" ? steps[m.content][1] : m[k]; });
        return copy;
      }));
    }
    return out;
  }
  function rawAnswer(p) {
    var a = p[9][2], out = {model: a[1].model};
    if (a[0] >= 0) { out.content = p[8][a[0]][1]; }
    Object.keys(a[1]).forEach(function (k) { out[k] = a[1][k]; });
    return out;
  }
"""

RUNNER = """
const fs = require("fs");
const raw = "; return {rawRequest: rawRequest, rawAnswer: rawAnswer";
const now = new Function(fs.readFileSync(process.argv[1], "utf8") + raw
  + ", stepOf: stepOf, callMeasured: callMeasured};")();
const old = new Function(process.argv[2] + raw + "};")();
const rows = JSON.parse(fs.readFileSync(0, "utf8"));
const request = (all, i, lib) => {  /* null: the old script threw (a number as a content) */
  try { return JSON.stringify(lib.rawRequest(all, i), null, 2); } catch (e) { return null; }
};
const views = (all, i, lib, step, facts) => !facts ? [step, null, null, null] : [step, facts,
  request(all, i, lib), JSON.stringify(lib.rawAnswer(all[i]), null, 2)];
const out = rows.map(([line, before]) => {
  const all = JSON.parse(line), was = JSON.parse(before);
  const facts = (c) => c.length ? now.callMeasured(c) : null;
  return [all.map((p, i) => views(all, i, now, now.stepOf(all, i), facts(p[8]))),
          was.map((p, i) => views(was, i, old, p[8], p[9].length ? p[9][0] : null))];
});
process.stdout.write(JSON.stringify(out));
"""


def old_line(found: list[tuple[Outcome, Pair]]) -> str:
    """A row's line as main built it, the fields the old script read (8: the step, 9: the call
    facts ``[measured, raw request, raw answer]``); the rest left out."""
    at: dict[tuple[int, int], int] = {}
    out: list[JSON] = []
    for position, (outcome, pair) in enumerate(found):
        calls, index = outcome.calls, pair.call_index
        at[(id(outcome), index)] = position
        role = calls[index].role if 0 <= index < len(calls) else None
        same = [i for i, c in enumerate(calls[:index]) if c.role == role]
        earlier = at.get((id(outcome), same[-1]), -1) if same else -1
        step = htmldata.transcript_step(calls, index)
        out.append([None] * 8 + [step, _old_facts(calls, index, step, earlier)])
    return shown_json(out)


def _old_facts(calls: list[Call], index: int, steps: list[JSON], earlier: int) -> list[JSON]:
    if not 0 <= index < len(calls):
        return []
    call = calls[index]
    request: dict[str, Any] = dict(call.request)
    messages, kept = request.get("messages"), 0
    if isinstance(messages, list):
        same = [c for c in calls[:index] if c.role == call.role]
        before = same[-1].request.get("messages") if same and earlier >= 0 else None
        if isinstance(before, list) and messages[: len(before)] == before:
            kept = len(before)
        request["messages"] = [_by_step(m, steps) for m in messages[kept:]]
    answer: dict[str, JSON] = {"model": call.response_model or call.model}
    if call.error is not None:
        answer["error"] = call.error
    answer["finish_reason"] = call.finish_reason
    if call.tool_calls:
        answer["tool_calls"] = list(call.tool_calls)
    usage: dict[str, JSON] = {"prompt_tokens": call.prompt_tokens}
    usage["completion_tokens"] = call.completion_tokens
    usage.update(call.usage_details or {})
    answer["usage"] = usage
    if call.system_fingerprint:
        answer["system_fingerprint"] = call.system_fingerprint
    text = call.text or None
    found = [i for i, s in enumerate(steps) if isinstance(s, list) and s == ["assistant", text]]
    if text is not None and not found:
        answer["content"] = call.text
    at = found[-1] if found else -1
    return [measured(call), [earlier if kept else -1, kept, request], [at, answer]]


def _by_step(message: JSON, steps: list[JSON]) -> JSON:
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        return message
    for i, step in enumerate(steps):
        if isinstance(step, list) and step[1] == message["content"] and step[0] != "assistant":
            return {**message, "content": i}
    return message


def _compare(rows: list[list[tuple[Outcome, Pair]]]) -> int:
    """Each row's calls' views, the script's from the new line against the old script's from
    the old line: the same text, call by call; how many calls were compared."""
    assert NODE is not None
    asked = [[shown_json(htmldata.pairs_data(found)), old_line(found)] for found in rows]
    done = subprocess.run(
        [NODE, "-e", RUNNER, str(SCRIPT), OLD_JS], input=json.dumps(asked), capture_output=True,
        text=True, encoding="utf-8", check=False, timeout=patient(300),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    compared = 0
    for found, (now, was) in zip(rows, json.loads(done.stdout), strict=True):
        for (outcome, pair), new, old in zip(found, now, was, strict=True):
            calls, index = outcome.calls, pair.call_index
            call = calls[index] if 0 <= index < len(calls) else None
            if call is not None and _numbered(call):  # the old script misread these
                assert new[2] is not None and old[2] != new[2]
                new, old = new[:2] + new[3:], old[:2] + old[3:]
            assert new == old, (call, pair.call_index)
            compared += 1
    return compared


def _numbered(call: Call) -> bool:
    """A message of the request has a number as its content: the old script read it as the
    index of a step's text (a wrong text, or a row that did not open); the script now shows the
    number, as recorded."""
    messages = call.request.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, dict) and type(m.get("content")) in (int, float) for m in messages
    )


def _row(calls: list[Call], paired: list[int]) -> list[tuple[Outcome, Pair]]:
    outcome = Outcome(nodeid="t.py::t[m]", test="t.py::t", model="m", outcome="passed",
                      calls=calls, pairs=[Pair(i, f"k{i}", "g.json", "ref") for i in paired])  # fmt: skip
    return [(outcome, p) for p in outcome.pairs]


TEXTS = ["", "Refund issued.", "café ☕ 東京 😀", "lone \ud800 half", "bidi \u202e override",
         "ctl \x1b[31m \x00 \x7f \x85", "line\nbreak\ttab", "x" * 21_000, "1", "  spaced  "]  # fmt: skip
IDS: list[Any] = [None, "", "call_1", "c\u202e1", "id ", "id\u2028", 0, 7, False, ["x"], "\ud83d"]
VALUES: list[Any] = [None, "text", "", 0, 1.5, True, False, {"a": 1}, [1, 2], "\ud800"]
TIMES: list[Any] = [None, 0.5, 1.5, 2.5, 0.49999999999999994, 9999.5, 9999.4, 10_000, 10_049.9,
                    12_250.0, 12_350.0, 12_250.000000000002, 1e14, 1e15, 1e20, 0.0, -0.0, -2.5,
                    -1, 0, 7, 123456789, float("nan"), float("inf"), 3.14159]  # fmt: skip
COUNTS: list[Any] = [None, 0, 7, 1234, 999_999, 1_000_000, -1234, 2**53 - 1, 2**53, 10**30, True]


def _content(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.5:
        return rng.choice(TEXTS[1:7])
    if roll < 0.7:
        parts: list[Any] = [{"type": "text", "text": rng.choice(TEXTS[:7])} for _ in range(3)]
        parts += [{"type": "image_url", "image_url": {"url": "data:,"}}, "loose", None]
        if rng.random() < 0.3:
            parts.append({"type": "text", "text": rng.choice(VALUES)})
        return rng.sample(parts, rng.randint(0, len(parts)))
    return rng.choice(VALUES)


def _message(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(["a string", 3, None, ["list"]])
    role = rng.choice(["user", "user", "system", "assistant", "tool", "developer", ""])
    if rng.random() < 0.05:
        role = rng.choice([None, 1, {"r": 1}])
    message: dict[str, Any] = {"role": role, "content": _content(rng)}
    if rng.random() < 0.1:
        del message["role" if rng.random() < 0.5 else "content"]
    if role == "tool" or rng.random() < 0.1:
        message["tool_call_id"] = rng.choice(IDS)
    if role == "assistant" and rng.random() < 0.3:
        message["tool_calls"] = [_tool_call(rng)]
    return message


def _tool_call(rng: random.Random) -> dict[str, Any]:
    name: Any = rng.choice(["lookup_order", "get_weather", "f\u202e", "名前"])
    arguments: Any = rng.choice(['{"id": "1182"}', "{}", "", '{"city": "Zürich"}'])
    if rng.random() < 0.1:
        name = rng.choice([None, 3])
    if rng.random() < 0.15:
        arguments = rng.choice([{"id": 1.0}, {"n": 10**20}, [1, "二"], None, 5])
    function = {"name": name, "arguments": arguments}
    tc: dict[str, Any] = {"type": "function", "function": function}
    if rng.random() < 0.15:
        tc = dict(function)  # flat, no "function"
    if rng.random() < 0.9:
        tc["id"] = rng.choice(IDS)
    return tc


def _call(rng: random.Random, role: str, messages: list[Any]) -> Call:
    request: dict[str, Any] = {"model": "gpt-4", "messages": messages, "temperature": 0}
    if rng.random() < 0.1:
        request = rng.choice([{"prompt": "no messages"}, {"messages": "not a list"},
                              {"x\u202e": "y", "__proto__": {"a": 1}, "messages": messages}])  # fmt: skip
    details = rng.choice([None, {}, {"cached_tokens": 3}, {"prompt_tokens": 99}, {"5": 1},
                          {"__proto__": 1, "reasoning_tokens": 2}])  # fmt: skip
    return Call(
        model="small-model", role=role, request=request,
        text=rng.choice(TEXTS) if rng.random() < 0.8 else rng.choice(TEXTS[:2]),
        finish_reason=rng.choice([None, "stop", "tool_calls", "length"]),
        response_model=rng.choice([None, "small-model-0613", ""]),
        system_fingerprint=rng.choice([None, "", "fp_1"]),
        tool_calls=[_tool_call(rng) for _ in range(rng.choice([0, 0, 1, 2]))] or rng.choice([None, []]),  # type: ignore[arg-type]
        usage_details=details, prompt_tokens=rng.choice(COUNTS), completion_tokens=rng.choice(COUNTS),
        tokens_estimated=rng.random() < 0.2, ttft_ms=rng.choice(TIMES), e2e_ms=rng.choice(TIMES),
        replayed=rng.random() < 0.15, cached=rng.random() < 0.15,
        error=rng.choice([None, None, None, "APIConnectionError: refused \u202e", ""]),
    )  # fmt: skip


def _conversation(rng: random.Random) -> list[tuple[Outcome, Pair]]:
    """An agent's calls (and a judge's between them): each request sends the history again, kept,
    rewritten, cut or longer; some calls paired, some not."""
    calls: list[Call] = []
    history: list[Any] = [_message(rng) for _ in range(rng.randint(0, 3))]
    for _ in range(rng.randint(1, 5)):
        role = "candidate" if rng.random() < 0.8 else "judge"
        calls.append(_call(rng, role, list(history)))
        roll = rng.random()
        if roll < 0.6:  # the answer and the tools' results sent back
            history += [{"role": "assistant", "content": calls[-1].text or None}]
            history += [_message(rng) for _ in range(rng.randint(0, 3))]
        elif roll < 0.75 and history:  # the history rewritten
            history[rng.randrange(len(history))] = _message(rng)
        elif roll < 0.9:  # cut
            history = history[: rng.randint(0, len(history))]
    paired = sorted(rng.sample(range(len(calls)), rng.randint(1, len(calls))))
    if rng.random() < 0.1:
        paired.append(len(calls) + 1)  # a pair whose call is not in the outcome
    return _row(calls, paired)


@needs_node
def test_the_page_derives_generated_calls_views_as_python_did() -> None:
    rng = random.Random(53)
    rows = [_conversation(rng) for _ in range(1_500)]
    assert _compare(rows) > 3_000


@needs_node
def test_the_page_derives_real_shaped_calls_views_as_python_did() -> None:
    """The report tests' run (tool-less calls, an error, a passthrough call, estimated tokens),
    an agent's tool call and result, and MT-Bench's two-turn conversations as a product sends
    them (the second turn's request holds the first's question and answer)."""
    import report_helpers as synth

    rows: list[list[tuple[Outcome, Pair]]] = []
    for o in (Outcome.from_dict(d) for d in synth.outcomes()):
        rows.append([(o, p) for p in o.pairs])
    tc = {"id": "call_0", "type": "function",
          "function": {"name": "lookup_order", "arguments": '{"id": "1182"}'}}  # fmt: skip
    ask = [{"role": "user", "content": "Where is order 1182?"}]
    agent = [Call("mini", "candidate", {"model": "gpt-4", "messages": ask}, tool_calls=[tc],
                  finish_reason="tool_calls", prompt_tokens=52, completion_tokens=17,
                  ttft_ms=80.5, e2e_ms=412.25),
             Call("mini", "candidate", {"model": "gpt-4", "messages": [*ask,
                  {"role": "assistant", "tool_calls": [tc]},
                  {"role": "tool", "tool_call_id": "call_0", "content": '{"status": "shipped"}'}]},
                  text="It shipped.", finish_reason="stop", prompt_tokens=90,
                  completion_tokens=6, ttft_ms=30.0, e2e_ms=10_250.0)]  # fmt: skip
    rows.append(_row(agent, [0, 1]))
    bench = SHARED_DATA / "mt_bench_gpt4_vs_slm" / "records.jsonl"
    if bench.is_file():
        for line in bench.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            for model, turns in record["other_answers"].items():
                if len(turns) < 2 or len(record["turns"]) < 2:
                    continue
                first = [{"role": "user", "content": record["turns"][0]}]
                second = [*first, {"role": "assistant", "content": turns[0]},
                          {"role": "user", "content": record["turns"][1]}]  # fmt: skip
                calls = [Call(model, "candidate", {"model": "gpt-4", "messages": m}, text=t)
                         for m, t in ((first, turns[0]), (second, turns[1]))]  # fmt: skip
                rows.append(_row(calls, [0, 1]))
    assert _compare(rows) >= 12


FACTS = """
const fs = require("fs");
const code = fs.readFileSync(process.argv[1], "utf8");
const lib = new Function(code + "; return {callMeasured: callMeasured};")();
process.stdout.write(JSON.stringify(JSON.parse(fs.readFileSync(0, "utf8")).map(lib.callMeasured)));
"""


@needs_node
def test_the_facts_round_every_time_as_python_writes_it() -> None:
    """``fmt.ms`` writes a tie to the even digit (``2.5`` is ``2 ms``, 12,250 ms ``12.2 s``;
    ``toFixed`` would write 3 and 12.3): the page's facts text is Python's for the ties, the
    edges of the two units and 20,000 times drawn over six decades."""
    from pytest_slam.util.textcodec import visible

    rng = random.Random(53)
    times = [t for t in TIMES if t is not None] + [k / 2 for k in range(0, 40_001, 7)]
    times += [10 ** rng.uniform(-2, 4.3) for _ in range(20_000)] + [9_999.499999999998]
    calls = [Call("m", "candidate", {}, ttft_ms=t, e2e_ms=t / 3 + 10_000 * rng.random(),
                  prompt_tokens=rng.choice(COUNTS[:-3]), completion_tokens=rng.choice(COUNTS[:-3]))
             for t in times]  # fmt: skip
    lines = [json.loads(shown_json(call_line([c], 0, -1, -1, "")[0])) for c in calls]
    assert NODE is not None
    done = subprocess.run([NODE, "-e", FACTS, str(SCRIPT)], input=json.dumps(lines),
                          capture_output=True, text=True, check=True, timeout=patient(300))  # fmt: skip
    assert json.loads(done.stdout) == [visible(measured(c)) for c in calls]
