/* The word diff of a pair's two answers, made by the page when the pair is drawn (issue 53: the
   report no longer diffs every pair as it is built). A port of diffview.diff_runs, step for step,
   so the page shows the spans the Python diff gives: the same tokens (diffview.TOKEN, with Python's
   Unicode classes), the same alignment (rapidfuzz's Indel.opcodes: the common prefix and suffix
   set aside, Hyyro's bit-parallel LCS matrix, walked back from the end as rapidfuzz walks it), one
   changed block between equal stretches (compare.tokendiff), a lone space between two changes
   counted as changed. Checked against the Python diff pair by pair (test_report_worddiff_js.py). */
var WORD_SPACE = "\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
var WORD_TOKEN = new RegExp("[" + WORD_SPACE + "]+|[\\p{L}\\p{N}_]+[" + WORD_SPACE + "]*|[^\\p{L}\\p{N}_" +
  WORD_SPACE + "][" + WORD_SPACE + "]*", "gu");
var ALL_SPACE = new RegExp("^[" + WORD_SPACE + "]+$", "u");

/* [same, deleted, inserted, same, ...] (any may be ""), and the share of tokens in common */
function diffRuns(reference, candidate) {
  var ref = reference.match(WORD_TOKEN) || [], cand = candidate.match(WORD_TOKEN) || [];
  var ops = tokenOpcodes(ref, cand), runs = [], matched = 0, total = 0;
  ops.forEach(function (o) {
    if (o[0] === "equal") { matched += o[2] - o[1]; }
    total += o[2] - o[1] + o[4] - o[3];
  });
  var shown = ops.slice();
  for (var k = 1; k < shown.length - 1; k++) {  /* a lone space between two changes: changed */
    var o = shown[k];
    if (o[0] === "equal" && shown[k - 1][0] !== "equal" && shown[k + 1][0] !== "equal" &&
        ref.slice(o[1], o[2]).every(function (t) { return ALL_SPACE.test(t); })) {
      shown[k] = ["replace", o[1], o[2], o[3], o[4]];
    }
  }
  shown.forEach(function (o) {
    if (o[0] === "equal") { runs.push(ref.slice(o[1], o[2]).join("")); return; }
    if (runs.length % 3 === 0) { runs.push(""); }
    runs.push(ref.slice(o[1], o[2]).join(""), cand.slice(o[3], o[4]).join(""));
  });
  return [runs, total ? 2 * matched / total : 1];
}

/* [tag, i1, i2, j1, j2]: equal stretches and, between them, one changed block each */
function tokenOpcodes(a, b) {
  var ids = new Map(), left = a.map(id), right = b.map(id), ops = [], i = 0, j = 0;
  function id(t) { if (!ids.has(t)) { ids.set(t, ids.size); } return ids.get(t); }
  function changed(i2, j2) {
    ops.push([i < i2 && j < j2 ? "replace" : i < i2 ? "delete" : "insert", i, i2, j, j2]);
  }
  equalBlocks(left, right).forEach(function (e) {
    if (i < e[0] || j < e[2]) { changed(e[0], e[2]); }
    ops.push(["equal", e[0], e[1], e[2], e[3]]);
    i = e[1]; j = e[3];
  });
  if (i < a.length || j < b.length) { changed(a.length, b.length); }
  return ops;
}

/* rapidfuzz's Indel alignment of two int sequences, as its equal blocks [i1, i2, j1, j2] */
function equalBlocks(a, b) {
  var prefix = 0, suffix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) { prefix++; }
  while (suffix < a.length - prefix && suffix < b.length - prefix &&
         a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) { suffix++; }
  var s1 = a.slice(prefix, a.length - suffix), s2 = b.slice(prefix, b.length - suffix);
  var edits = [], n = s1.length, m = s2.length, words = (n + 31) >>> 5;
  if (n && m) {
    var match = new Map(), S = new Uint32Array(words).fill(0xffffffff);
    var matrix = new Uint32Array(m * words);
    s1.forEach(function (t, c) {
      if (!match.has(t)) { match.set(t, new Uint32Array(words)); }
      match.get(t)[c >>> 5] |= 1 << (c & 31);
    });
    for (var r = 0; r < m; r++) {  /* S = (S + u) | (S - u), u = S & match: carried word to word */
      var pm = match.get(s2[r]), carry = 0;
      for (var k = 0; k < words; k++) {
        var v = S[k], u = pm ? (v & pm[k]) >>> 0 : 0, sum = v + u + carry;
        carry = sum > 0xffffffff ? 1 : 0;
        S[k] = (sum >>> 0) | (v & ~u);
        matrix[r * words + k] = S[k];
      }
    }
  }
  function bit(r, c) { return (matrix[r * words + (c >>> 5)] >>> (c & 31)) & 1; }
  var col = n, row = m;  /* back from the end: a deletion, an insertion, else a match */
  while (row && col) {
    if (bit(row - 1, col - 1)) { col--; edits.push([0, col, row]); continue; }
    row--;
    if (row && !bit(row - 1, col - 1)) { edits.push([1, col, row]); } else { col--; }
  }
  while (col) { col--; edits.push([0, col, row]); }
  while (row) { row--; edits.push([1, col, row]); }
  edits.reverse();
  var blocks = [], sp = 0, dp = 0;  /* rapidfuzz's Editops.as_opcodes: the gaps between edits */
  edits.forEach(function (e) {
    var s = e[1] + prefix, d = e[2] + prefix;
    if (sp < s || dp < d) { blocks.push([sp, s, dp, d]); sp = s; dp = d; }
    if (e[0] === 0) { sp++; } else { dp++; }
  });
  if (sp < a.length || dp < b.length) { blocks.push([sp, a.length, dp, b.length]); }
  return blocks;
}

/* "65%": Python's format(ratio, ".0%"), the product by 100 rounded half to even */
function percent(ratio) {
  var x = ratio * 100, f = Math.floor(x), d = x - f;
  return (d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f) + "%";
}
