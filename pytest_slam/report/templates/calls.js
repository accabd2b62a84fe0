/* A call's views, derived from what its pair's line carries (htmlcalls.call_line: the request
   and answer as recorded, and a few numbers): its transcript step (htmldata.transcript_step),
   its tokens and time (htmlcalls.measured; each time as fmt.ms rounded it), and its raw
   request and answer. A port: tests/report/test_report_calls_js.py checks, call by call, that
   it shows what the Python derivation shows. Where the two could differ the line carries
   Python's own text instead (a step in the pair's field 9, the facts' text in the flags). */
function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
function pyMs(v) {  /* fmt.ms: the whole milliseconds the build rounded, or its text */
  return v === null ? "-" : typeof v === "string" ? v : v + " ms";
}
function pyCount(n) {  /* f"{n:,}" of a safe integer; None: "-" */
  if (n === null) { return "-"; }
  return (n < 0 ? "-" : "") + String(Math.abs(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}
/* call: [earlier pair, messages kept from its request, where the step's messages start, a call
   of the same role before (1), the request, model, text (1: the pair's candidate text), finish
   reason, tool calls, prompt tokens, completion tokens, usage details, system fingerprint,
   TTFT and E2E (whole ms, or fmt.ms's text), flags (1 estimated, 2 replayed, 4 cached; a string: the facts as Python wrote them)] */
function callMeasured(c) {
  if (typeof c[15] === "string") { return c[15]; }
  var tokens = "prompt " + pyCount(c[9]) + " + completion " + pyCount(c[10]) + " tokens";
  if (c[15] & 1) { tokens += " (estimated)"; }
  var parts = [tokens, "TTFT " + pyMs(c[13]), "E2E " + pyMs(c[14])];
  if (c[15] & 2) {
    parts.push("replayed (not measured in this run)");
  } else if (c[15] & 4) {
    parts.push("from the answer cache (timed in the run that asked first)");
  }
  return parts.join(" \u00b7 ");
}
function callText(p) { return p[8][6] === 1 ? p[7] : p[8][6]; }
/* what the call's request sent that the same role's call before it had not (its previous answer
   is shown as that call's own), then its answer: its error, its text, each tool call */
function stepOf(all, i) {
  var p = all[i], c = p[8], out = [];
  if (p[9]) { return p[9]; }
  if (!c || !c.length) { return out; }
  var messages = rawRequest(all, i).messages;
  (Array.isArray(messages) ? messages.slice(c[2]) : []).forEach(function (m) {
    var role = isObject(m) && m.role !== undefined ? m.role : "";
    if (role === "assistant" && c[3]) { return; }
    var who = role === "tool" ? (m.tool_call_id ? "tool result " + m.tool_call_id : "tool result") : role || "message";
    out.push([who, stepContent(m)]);
  });
  if (p[5] !== null) { out.push(["error", p[5]]); }
  var text = callText(p);
  if (text) { out.push(["assistant", text]); }
  (c[8] || []).forEach(function (tc) {
    var f = isObject(tc.function) ? tc.function : tc;
    out.push([tc.id ? "tool call " + tc.id : "tool call", f.name + "(" + f.arguments + ")"]);
  });
  return out;
}
function stepContent(m) {  /* a message's text: its string content, or its text parts joined */
  var content = isObject(m) ? m.content : null;
  if (Array.isArray(content)) {
    return content.filter(isObject).map(function (part) { return part.text; }).filter(function (t) { return t; }).join("\n");
  }
  return content === null || content === undefined ? "" : String(content);
}
/* the request as sent: the messages its previous call sent (that pair's), then its own */
function rawRequest(all, i) {
  var c = all[i][8], q = c[4], out = {};
  var before = c[0] >= 0 && all[c[0]][8].length ? (rawRequest(all, c[0]).messages || []).slice(0, c[1]) : [];
  Object.keys(q).forEach(function (k) { out[k] = q[k]; });
  if (Array.isArray(q.messages)) { out.messages = before.concat(q.messages); }
  return out;
}
function rawAnswer(p) {  /* the answer as recorded, its keys in the order the page always showed */
  var c = p[8], out = {model: c[5]}, text = callText(p);
  var usage = {prompt_tokens: c[9], completion_tokens: c[10]};
  if (text) { out.content = text; }
  if (p[5] !== null) { out.error = p[5]; }
  out.finish_reason = c[7];
  if (c[8]) { out.tool_calls = c[8]; }
  Object.keys(c[11] || {}).forEach(function (k) {  /* as parsed: a key "__proto__" too */
    Object.defineProperty(usage, k, {value: c[11][k], enumerable: true, writable: true, configurable: true});
  });
  out.usage = usage;
  if (c[12]) { out.system_fingerprint = c[12]; }
  return out;
}
