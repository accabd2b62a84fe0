"""The one codec for text a model sent: JSON that always encodes, and a visible form for display.

A model's answer is any JSON string, so it may hold what UTF-8 cannot encode (a lone UTF-16
surrogate such as ``"\\ud800"``, from a proxy or an emoji split across stream chunks) and what a
screen does not show as it is (bidi controls such as U+202E, which reorder the text around them).
Every writer of JSON text goes through ``dumps`` and every surface that shows text to a person
through ``visible``, so no writer crashes on an answer and no page is reordered by one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# What UTF-8 cannot encode: UTF-16 surrogates (a JSON escape of a lone half reads back as one).
_SURROGATE = re.compile("[\ud800-\udfff]")
# Never shown as what they are: bidi embeddings, overrides, isolates and marks (Trojan Source),
# line and paragraph separators, C1 controls and DEL, the BOM and the two non-characters XML
# refuses (zero-width joiners are text: kept).
_HIDDEN = "\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ufffe\uffff\x7f-\x9f"
_ESCAPED = re.compile(f"[\ud800-\udfff{_HIDDEN}]")
# For display, C0 controls too (NUL, ESC: a terminal escape), but not tab, newline and CR; on a
# line that must stay one line (a progress line), those three too.
_SHOWN = re.compile(f"[\ud800-\udfff{_HIDDEN}\x00-\x08\x0b\x0c\x0e-\x1f]")
_SHOWN_ON_A_LINE = re.compile(f"[\ud800-\udfff{_HIDDEN}\x00-\x1f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _marker(match: re.Match[str]) -> str:
    return f"\u27e8U+{ord(match.group()):04X}\u27e9"


def dumps(obj: Any, *, hidden: bool = True, **options: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **options)`` whose text always encodes as UTF-8.

    A lone surrogate is written as its JSON escape (``\\ud800``), so the file reads back to the
    same string in any JSON reader; two halves that form a pair are written as the character they
    form, as a reader would read their two escapes. With ``hidden``, the invisible and bidi
    controls are escaped too (``\\u202e``), so a committed file shows them in a diff; both are
    lossless. Only characters inside JSON strings are rewritten: the syntax json writes is ASCII.
    """
    text = json.dumps(obj, ensure_ascii=False, **options)
    if text.isascii() and "\x7f" not in text:  # the usual case, at C speed: nothing to rewrite
        return text
    if _SURROGATE.search(text):  # pairs first: the same text for a value and its read-back
        text = joined([text])
    return (_ESCAPED if hidden else _SURROGATE).sub(_escape, text)


def visible(text: str, *, line: bool = False) -> str:
    """``text`` as a person should see it: every control a screen would hide or apply (bidi
    overrides, zero-width marks, NUL, ESC...) and every lone surrogate replaced by a marker
    naming its code point, ``⟨U+202E⟩``; tab, newline and CR kept, unless the text must stay
    one ``line``."""
    return (_SHOWN_ON_A_LINE if line else _SHOWN).sub(_marker, text)


def valid(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD: for a library that needs valid Unicode (a
    tokenizer, an embedding model), never for a file that must read back as it was (``dumps``)."""
    return _SURROGATE.sub("\ufffd", text)


def joined(parts: Iterable[str]) -> str:
    """The pieces of a streamed text as one string, two halves of a surrogate pair that arrived in
    two chunks joined into the character they encode (as a JSON reader of the whole text would
    read them); a lone half is kept as it is."""
    text = "".join(parts)
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def for_strict_reader(text: str) -> str:
    """JSON ``text`` with every surrogate escape (``\\ud800``) as ``\\ufffd``, for a reader that
    refuses lone ones (pydantic's JSON parser) and only checks types: each string stays a string
    (after an escaped backslash the same six characters are plain text either way)."""
    return _SURROGATE_ESCAPE.sub(r"\\ufffd", text) if _SURROGATE_ESCAPE.search(text) else text


# A string a transport could not carry, as it travels: this prefix, then its ``unicode_escape``
# form (ASCII; unlike a JSON escape, it keeps two halves that arrived apart as two).
_CARRIED = "\x00slam-text:"


def carried(data: Any) -> tuple[Any, bool]:
    """Plain ``data`` (dicts, lists, tuples, strings, numbers) that a UTF-8-only transport can
    carry (xdist's execnet refuses a lone surrogate), and whether anything was rewritten: each
    string holding a surrogate, or starting as a rewritten one does, is replaced by its escaped
    form. ``uncarried`` restores exactly the same strings; an unchanged ``data`` is returned as it
    is (the usual case, checked at C speed)."""
    try:
        text = json.dumps(data, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # keys JSON has no form for: walk it all
        text = "\ud800"
    if not _SURROGATE.search(text) and "\\u0000slam-text:" not in text:
        return data, False
    return _walk(data, _carry), True


def uncarried(data: Any) -> Any:
    """``data`` as it was before ``carried`` rewrote it."""
    return _walk(data, _uncarry)


def _carry(text: str) -> str:
    if _SURROGATE.search(text) or text.startswith(_CARRIED):
        return _CARRIED + text.encode("unicode_escape").decode("ascii")
    return text


def _uncarry(text: str) -> str:
    if text.startswith(_CARRIED):
        return text[len(_CARRIED) :].encode("ascii").decode("unicode_escape")
    return text


def _walk(data: Any, change: Any) -> Any:
    if isinstance(data, str):
        return change(data)
    if isinstance(data, dict):
        return {_walk(k, change): _walk(v, change) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(_walk(v, change) for v in data)
    return data
