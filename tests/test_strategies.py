"""pytest_slam.strategies: every example has what its strategy's docstring promises, and each kind
of hostile input is reachable from ``ticket_text``.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from pytest_slam.strategies import (
    BLANKS,
    HARD_CHARACTERS,
    INJECTIONS,
    SENTENCES,
    blank_fields,
    hard_unicode_text,
    injection_strings,
    long_text,
    ticket_text,
)

EXAMPLES = settings(max_examples=150, derandomize=True, deadline=None)


def _looks_blank(text: str) -> bool:
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


@EXAMPLES
@given(text=hard_unicode_text())
def test_hard_unicode_text_always_holds_a_hard_character(text: str) -> None:
    assert any(hard in text for hard in HARD_CHARACTERS)
    assert 1 <= len(text) <= 200


@EXAMPLES
@given(data=st.data(), low=st.integers(0, 300), span=st.integers(0, 300))
def test_hard_unicode_text_keeps_its_size_bounds(data: st.DataObject, low: int, span: int) -> None:
    high = max(low + span, 1)
    text = data.draw(hard_unicode_text(min_size=low, max_size=high))
    assert low <= len(text) <= high
    assert any(hard in text for hard in HARD_CHARACTERS if len(hard) <= high)


def test_hard_unicode_text_rejects_impossible_sizes() -> None:
    with pytest.raises(ValueError, match="min_size <= max_size"):
        hard_unicode_text(min_size=10, max_size=5)
    with pytest.raises(ValueError, match="max_size >= 1"):
        hard_unicode_text(min_size=0, max_size=0)


@EXAMPLES
@given(text=long_text())
def test_long_text_length_is_within_bounds_and_made_of_sentences(text: str) -> None:
    assert 2_000 <= len(text) <= 8_000
    assert text.startswith(SENTENCES)


@EXAMPLES
@given(text=long_text(min_chars=50, max_chars=60))
def test_long_text_honours_small_bounds(text: str) -> None:
    assert 50 <= len(text) <= 60


def test_long_text_rejects_impossible_sizes() -> None:
    with pytest.raises(ValueError, match="min_chars <= max_chars"):
        long_text(min_chars=10, max_chars=5)


@EXAMPLES
@given(text=injection_strings())
def test_injection_strings_always_carry_an_injection(text: str) -> None:
    (found,) = [inj for inj in INJECTIONS if text.endswith(inj)]
    assert text == found or text.removesuffix(" " + found) in SENTENCES


@EXAMPLES
@given(text=blank_fields())
def test_blank_fields_look_empty(text: str) -> None:
    assert _looks_blank(text)


def test_blanks_include_empty_whitespace_and_invisible_characters() -> None:
    assert "" in BLANKS
    assert any(b and b.isspace() for b in BLANKS)
    assert any(b.strip() != "" for b in BLANKS)  # blank to a person, not to str.strip()


@pytest.mark.parametrize(
    ("kind", "condition"),
    [
        ("ordinary", lambda s: s in SENTENCES),
        ("hard unicode", lambda s: any(h in s for h in HARD_CHARACTERS if len(h) > 1)),
        ("injection", lambda s: any(inj in s for inj in INJECTIONS)),
        ("blank", lambda s: s != "" and _looks_blank(s)),
        ("long", lambda s: len(s) >= 2_000),
    ],
)
def test_ticket_text_reaches_every_kind_of_input(kind: str, condition) -> None:
    example = find(ticket_text(), condition, settings=settings(max_examples=2_000, database=None))
    assert condition(example), kind
