"""The xdist progress channel's datagrams: size, MAC and replay checked before anything is parsed."""

from __future__ import annotations

import json

from pytest_slam.run.workers.datagram import MAX_BYTES, MAX_TEXT, Opener, seal

SECRET = "0123456789abcdef0123456789abcdef"


def test_a_sealed_line_opens_once() -> None:
    opener = Opener(SECRET)
    data = seal(SECRET, "gw1", "slow (candidate) still answering")
    assert opener.open(data) == ("gw1", "slow (candidate) still answering", False)
    assert opener.open(data) is None  # replayed


def test_anything_else_is_refused_without_raising() -> None:
    opener = Opener(SECRET)
    good = seal(SECRET, "gw0", "line")
    tampered = good[:-2] + b'!"' + b"}"
    hostile = [
        b"",
        b"[" * 60000,
        json.dumps({"secret": SECRET, "worker": "gw0", "text": "old format"}).encode(),
        seal("another run's secret", "gw0", "forged"),
        tampered,
        good + b"x" * MAX_BYTES,  # oversized, whatever it starts with
    ]
    assert [opener.open(d) for d in hostile] == [None] * len(hostile)
    assert opener.open(good) == ("gw0", "line", False)  # still opens what is ours


def test_a_sealed_document_that_is_not_a_line_is_refused() -> None:
    import hashlib
    import hmac

    opener = Opener(SECRET)
    for doc in (b"[" * 5000, b"[1, 2]", b'{"worker": 1, "text": "x"}'):
        body = b"n" * 16 + doc
        data = hmac.new(SECRET.encode(), body, hashlib.sha256).digest() + body
        assert opener.open(data) is None


def test_a_long_line_is_cut_to_fit_and_escapes_are_shown() -> None:
    data = seal(SECRET, "gw0", "\x1b[2J" + "y" * 10 * MAX_TEXT)
    assert len(data) <= MAX_BYTES
    _, text, _ = Opener(SECRET).open(data) or ("", "", False)
    assert text.startswith("\u27e8U+001B\u27e9[2Jyyy") and text.endswith("...")
    assert "\x1b" not in text
    emoji = seal(SECRET, "gw0", "\U0001f600" * 10 * MAX_TEXT)  # 12 bytes each as JSON
    assert len(emoji) <= MAX_BYTES and Opener(SECRET).open(emoji) is not None
    one = seal(SECRET, "gw0", "a\u202eb\nc\ud800")
    assert Opener(SECRET).open(one) == ("gw0", "a⟨U+202E⟩b⟨U+000A⟩c⟨U+D800⟩", False)
