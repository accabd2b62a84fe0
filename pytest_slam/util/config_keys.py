"""The one wording of "unknown key" for every ``[tool.slam.*]`` section, with the nearest known key.

Kept apart from config.py (which imports pydantic) so models.py can use it at no import cost.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(key: str, known: Iterable[str]) -> str | None:
    """The known key a typo most likely meant, or None when nothing is close."""
    matches = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(unknown: list[str], known: Iterable[str]) -> str:
    """``"did you mean 'samples'? "`` for one typo, ``'smaple' -> 'samples'`` pairs for several."""
    known = list(known)
    pairs = [(key, nearest(key, known)) for key in unknown]
    pairs = [(key, match) for key, match in pairs if match]
    if not pairs:
        return ""
    if len(unknown) == 1:
        return f"did you mean {pairs[0][1]!r}? "
    return "did you mean " + ", ".join(f"{k!r} -> {m!r}" for k, m in pairs) + "? "


def unknown_keys_line(section: str, unknown: Iterable[str], known: Iterable[str]) -> str:
    """``[tool.slam] has unknown keys ['refernce']; did you mean 'reference'? Known keys: ...``."""
    unknown, known = sorted(map(str, unknown)), sorted(known)
    return (
        f"[{section}] has unknown keys {unknown}; {did_you_mean(unknown, known)}"
        f"known keys: {', '.join(known)}."
    )
