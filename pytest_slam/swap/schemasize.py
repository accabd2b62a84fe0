"""What a whole structured answer needs: the tokens of a complete answer of a request's own schema,
and whether a cut answer is already whole (issue 44).

A cap derived from the reference alone fails complete answers when the reference is short or not
JSON at all (one token gave 67; SmolLM2's answers of the request's schema took 65-68). The
request's ``response_format`` schema, or its tools' ``parameters``, says how long a whole answer
is whatever the reference was: each field's key and a typical value (an enum's longest member,
a number's few digits, a short phrase for free text), at ``CHARS_PER_TOKEN``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

CHARS_PER_TOKEN = 3.0  # JSON in a small model's tokenizer: short keys, punctuation, digits
FREE_TEXT = 16  # tokens of a string the schema bounds in no way (a short phrase)
NUMBER, BOOLEAN, NULL, UNKNOWN = 3, 1, 1, 8
ITEMS = 3  # an array's items when the schema does not say how many
MAX_DEPTH = 8  # $ref cycles and deep nesting stop here
TOOL_CALL = 12  # a tool call's own frame: its id, name field and the arguments' quoting
FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```$", re.S)


def _text_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """A local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) followed once; anything else as is."""
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    found: Any = root
    for part in ref[2:].split("/"):
        found = found.get(part) if isinstance(found, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def schema_tokens(node: object, root: Mapping[str, Any] | None = None, depth: int = 0) -> int:
    """Tokens of one complete answer of the JSON Schema ``node``, written compactly."""
    if not isinstance(node, Mapping) or depth > MAX_DEPTH:
        return UNKNOWN
    root = node if root is None else root
    node = _resolve(node, root)
    options = [o for k in ("anyOf", "oneOf", "allOf") for o in node.get(k) or () if o]
    if options:
        return max(schema_tokens(o, root, depth + 1) for o in options)
    for key in ("enum", "const"):
        values = node.get("enum") if key == "enum" else [node.get("const")] if key in node else []
        if values:
            return max(_text_tokens(json.dumps(v)) for v in values)
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return max(_of_type(str(k) if k else "", node, root, depth) for k in kinds)


def _of_type(kind: str, node: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> int:
    props = node.get("properties")
    if kind == "object" or (not kind and isinstance(props, Mapping)):
        fields = props if isinstance(props, Mapping) else {}
        return 2 + sum(
            _text_tokens(str(name)) + 2 + schema_tokens(value, root, depth + 1)
            for name, value in fields.items()
        )
    if kind == "array" or (not kind and "items" in node):
        count = node.get("minItems") or ITEMS
        bound = node.get("maxItems")
        if isinstance(bound, int):
            count = min(count, bound)
        return 2 + count * (1 + schema_tokens(node.get("items") or {}, root, depth + 1))
    if kind == "string":
        longest = node.get("maxLength")
        if isinstance(longest, int):
            return min(FREE_TEXT, _text_tokens("x" * longest)) + 1
        return FREE_TEXT
    if kind in ("integer", "number"):
        return NUMBER
    if kind == "boolean":
        return BOOLEAN
    if kind == "null":
        return NULL
    return UNKNOWN


def request_schemas(body: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], int]]:
    """The schemas a structured request's answer follows, each with its own frame's tokens: the
    ``response_format`` json_schema's, or each tool's (function's) ``parameters``."""
    found: list[tuple[Mapping[str, Any], int]] = []
    fmt = body.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if isinstance(schema, Mapping):
            found.append((schema, 0))
    functions = [t.get("function") for t in body.get("tools") or () if isinstance(t, Mapping)]
    functions += list(body.get("functions") or ())
    for fn in functions:
        if isinstance(fn, Mapping) and isinstance(fn.get("parameters"), Mapping):
            frame = TOOL_CALL + _text_tokens(str(fn.get("name") or ""))
            found.append((fn["parameters"], frame))
    return found


def whole_answer_tokens(body: Mapping[str, Any]) -> int | None:
    """Tokens a whole answer of the request's own schema needs (the longest of its schemas), or
    None when it carries none (``json_object``, a tool without parameters)."""
    sizes = [frame + schema_tokens(schema) for schema, frame in request_schemas(body)]
    return max(sizes) if sizes else None


def _parsed(text: str) -> tuple[bool, object]:
    body = text.strip()
    fenced = FENCE.match(body)
    if fenced:  # a fenced block: its inside
        body = fenced.group(1)
    try:
        return True, json.loads(body)
    except ValueError:
        return False, None


def _valid(value: object, schema: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` is valid against ``schema`` (True when jsonschema is not installed or
    cannot read the schema: then parsing whole is the check)."""
    if schema is None:
        return True
    try:
        import jsonschema
    except ImportError:
        return True
    try:
        cls = jsonschema.validators.validator_for(schema)
        return bool(cls(schema).is_valid(value))
    except (jsonschema.SchemaError, TypeError, ValueError):
        return True


def complete(body: Mapping[str, Any], text: str, tool_calls: list[Any] | None) -> bool:
    """Whether a structured answer cut at a cap is whole anyway: its tool calls' arguments (else
    its text) complete JSON, valid against the request's schema when it carries one."""
    if tool_calls:
        params = {
            str(fn.get("name")): fn.get("parameters")
            for t in body.get("tools") or ()
            if isinstance(t, Mapping) and isinstance(fn := t.get("function"), Mapping)
        }
        for tc in tool_calls:
            fn = tc.get("function") if isinstance(tc, Mapping) else None
            fn = fn if isinstance(fn, Mapping) else tc if isinstance(tc, Mapping) else {}
            args = fn.get("arguments")
            ok, value = (True, args) if isinstance(args, dict) else _parsed(str(args or ""))
            schema = params.get(str(fn.get("name")))
            if not ok or not _valid(value, schema if isinstance(schema, Mapping) else None):
                return False
        return True
    ok, value = _parsed(text)
    if not ok:
        return False
    schemas = [s for s, frame in request_schemas(body) if frame == 0]
    return _valid(value, schemas[0] if schemas else None)
