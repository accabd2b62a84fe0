"""JSON helpers for the structured scorers: lenient parsing, leaf paths and ignore patterns.

Parsing policy (documented for users in ``JsonScorer``): an answer that is JSON parses as is. When
``lenient`` is on, a model's habit of wrapping JSON is tolerated: one fenced block (```json ... ```)
is taken from the answer, and failing that the first complete JSON object or array after any
leading prose. Whatever follows a JSON value (a trailing remark) is ignored. How the JSON was found
is reported, so a test author sees that the model did wrap it.
"""

from __future__ import annotations

import json
import re
from typing import Final

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON

Segment = str | int
Path = tuple[Segment, ...]


class Wildcard:
    """``*`` in an ignore pattern: any one key or index."""

    def __repr__(self) -> str:
        return "*"


WILDCARD: Final = Wildcard()
Pattern = tuple[Segment | Wildcard, ...]

_FENCE = re.compile(r"```[ \t]*(?:json[c5]?|JSON)?[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_PATTERN_TOKEN = re.compile(r"""\.?([A-Za-z_][\w-]*|\*)|\[(\*|-?\d+|"[^"]*"|'[^']*')\]""")


class NotJson(ValueError, SlamError, kind="scorer"):
    """The text holds no JSON value; the message is the parse error a user can act on."""


def parse_answer(text: str, *, lenient: bool = True) -> tuple[JSON, str]:
    """Parse an answer as JSON; return (value, how it was found: "" when it was plain JSON)."""
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as err:
        first_error = err
    if not text.strip():
        raise NotJson("empty answer")
    if lenient:
        fenced = _FENCE.findall(text)
        if len(fenced) == 1:
            try:
                return json.loads(fenced[0]), "extracted from a ``` fence"
            except json.JSONDecodeError as err:
                raise NotJson(f"fenced block: {_describe(err)}") from None
        found = _first_embedded(text)
        if found is not None:
            return found, "extracted from surrounding prose"
    raise NotJson(_describe(first_error))


def _first_embedded(text: str) -> JSON:
    """The first complete JSON object or array inside ``text``, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return value
    return None


def _describe(err: json.JSONDecodeError) -> str:
    return f"{err.msg} at line {err.lineno} column {err.colno}"


def leaves(value: JSON, prefix: Path = ()) -> dict[Path, JSON]:
    """Flatten ``value`` to {path: scalar}; an empty object or array is a leaf of its own."""
    if isinstance(value, dict) and value:
        out: dict[Path, JSON] = {}
        for key, item in value.items():
            out.update(leaves(item, (*prefix, str(key))))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(leaves(item, (*prefix, index)))
        return out
    return {prefix: value}


def format_path(path: Path) -> str:
    """``("items", 0, "ts")`` -> ``$.items[0].ts``."""
    parts = ["$"]
    for seg in path:
        if isinstance(seg, int):
            parts.append(f"[{seg}]")
        elif re.fullmatch(r"[A-Za-z_]\w*", seg):
            parts.append(f".{seg}")
        else:
            parts.append(f"[{json.dumps(seg)}]")
    return "".join(parts)


def parse_pattern(pattern: str) -> Pattern:
    """Compile an ignore pattern like ``$.id``, ``items[*].ts`` or ``$["a b"][0]``.

    Patterns are rooted (a leading ``$`` is optional); ``*`` or ``[*]`` matches any one key or
    index; a pattern also ignores everything below the node it names.
    """
    rest = pattern.strip()
    rest = rest[1:] if rest.startswith("$") else rest
    segments: list[Segment | Wildcard] = []
    pos = 0
    while pos < len(rest):
        match = _PATTERN_TOKEN.match(rest, pos)
        if match is None or match.end() == pos:
            raise ValueError(
                f"json scorer: cannot read ignore path {pattern!r} at {rest[pos:]!r}; "
                'write it like "$.id", "items[*].ts" or \'$["odd key"]\''
            )
        segments.append(_segment(match.group(1), match.group(2)))
        pos = match.end()
    return tuple(segments)


def _segment(name: str | None, bracket: str | None) -> Segment | Wildcard:
    token = name if name is not None else bracket
    assert token is not None
    if token == "*":
        return WILDCARD
    if bracket is not None and bracket[0] in "\"'":
        return bracket[1:-1]
    if bracket is not None:
        return int(bracket)
    return token


def matches(pattern: Pattern, path: Path) -> bool:
    """Whether ``path`` lies at or below the node ``pattern`` names."""
    if len(pattern) > len(path):
        return False
    for want, seg in zip(pattern, path, strict=False):
        if isinstance(want, Wildcard):
            continue
        if isinstance(want, int) != isinstance(seg, int) or want != seg:
            return False
    return True
