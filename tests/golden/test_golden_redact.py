"""No API key or auth header ever reaches a committed golden file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.redact import REDACTED, _scrub, scrub, scrub_text
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz12345"


def test_key_shapes_and_secret_env_values_are_redacted(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "acme-4f9a8b7c")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijk123")
    monkeypatch.setenv("SHORT_TOKEN", "x")
    data = {
        "a": OPENAI_KEY,
        "b": ["Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOjF9.sig", "acme-4f9a8b7c"],
        "c": {"nested": f"use key {OPENAI_KEY} and hf_abcdefghijk123 here"},
        "api_key": "anything",
        "n": 3,
    }
    assert scrub(data) == {
        "a": REDACTED,
        "b": [f"Bearer {REDACTED}", REDACTED],
        "c": {"nested": f"use key {REDACTED} and {REDACTED} here"},
        "api_key": REDACTED,
        "n": 3,
    }


def test_ordinary_text_is_left_alone(monkeypatch):
    monkeypatch.setenv("SHORT_TOKEN", "x")
    text = (
        "Banks compare their capital to risk-weighted assets; the Bearer of bad news; "
        "scikit-learn is also called sk-learn-compatible-estimators-library; x marks it."
    )
    assert scrub({"t": text}) == {"t": text}


def test_a_written_golden_file_holds_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("INTERNAL_SECRET", "s3cr3t-value")
    request = {
        "model": "gpt-4",
        "messages": [{"role": "user", "content": "config: s3cr3t-value"}],
        "extra_headers": {"Authorization": f"Bearer {OPENAI_KEY}"},
        "api_key": OPENAI_KEY,
    }
    answer = GoldenAnswer(text=f"Your key {OPENAI_KEY} is set.", model="gpt-4-0613")
    store = GoldenStore(tmp_path / "golden", "openai:gpt-4")
    store.record("tests/test_cfg.py", GoldenRecord(request_key(request), request, [answer]), "t")
    [path] = store.flush()
    text = path.read_text()
    assert OPENAI_KEY not in text and "s3cr3t-value" not in text and "Authorization" not in text
    assert "Your key [redacted] is set." in text and '"content": "config: [redacted]"' in text


SECRETS = [  # (text, what remains): every OpenAI key shape, short ones included, and bearer tokens
    ("sk-abc123", REDACTED),
    ("key: sk-abc123.", f"key: {REDACTED}."),
    ("sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWx", REDACTED),
    ("sk-proj-abcdefghijkl", REDACTED),  # a project key with no digit in sight
    ("sk-svcacct-Xy1_zz0", REDACTED),
    ("sk-admin-abcdefghij", REDACTED),
    ("(sk-Ab1)", f"({REDACTED})"),
    ("Bearer xxx", f"Bearer {REDACTED}"),
    ('{"h": "Bearer xxx"}', f'{{"h": "Bearer {REDACTED}"}}'),
    ("Bearer eyJhbGciOi.eyJzdWIi.sig and more", f"Bearer {REDACTED} and more"),
    ("bearer abc123def", f"bearer {REDACTED}"),
    ("Authorization: Bearer xxx", f"Authorization: {REDACTED}"),
    ("authorization=Basic dXNlcjpwYXNz; next", f"authorization={REDACTED}; next"),
    ('"Authorization": "token-1"', f'"Authorization": "{REDACTED}"'),
    ("Proxy-Authorization: abc", f"Proxy-Authorization: {REDACTED}"),
]
ORDINARY = [
    "a risk-free rate",
    "see task-42 and task-",
    "ask-me-123 anything",
    "desk-1 is free",
    "sk-learn estimators",
    "sk-12",
    "the Bearer of bad news",
    "Bearer bonds are paper",
    "bearer shares and bearer of",
    "authorization",
]


@pytest.mark.parametrize(("text", "kept"), SECRETS, ids=[t for t, _ in SECRETS])
def test_every_key_shape_and_bearer_token_is_redacted(text, kept):
    assert scrub_text(text, []) == kept


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_words_are_not_secrets(text):
    assert scrub_text(text, []) == text


# Pieces a string in a report is made of: words, every secret shape above, secret field names,
# characters JSON escapes, and an environment secret with a quote in it.
PIECES = [
    *(t for t, _ in SECRETS), *ORDINARY, "hello", "café", 'say "hi"', "back\\slash", "\n",
    "acme-4f9a8b7c", 'pa"ss-w0rd', "API_KEY", "Authorization", "x-api-key",
]  # fmt: skip


_LEAVES = st.one_of(
    st.none(), st.integers(), st.floats(allow_nan=False),
    st.lists(st.sampled_from(PIECES), max_size=3).map(" ".join),
)  # fmt: skip
_KEYS = st.sampled_from(["text", "api_key", "Api-Key", "n", "x"])
_DOCUMENTS = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@given(_DOCUMENTS)
def test_the_quick_look_never_skips_what_the_walk_would_redact(data: object) -> None:
    """``scrub`` looks at the serialized object first and walks it only when something could be a
    secret; whatever the object, the result is the walk's own."""
    secrets = ["acme-4f9a8b7c", 'pa"ss-w0rd']
    assert scrub(data, secrets) == _scrub(data, secrets)


ALONE = [  # each kind of secret as the only one in a document: the quick look must send it on
    *({"text": t} for t, _ in SECRETS),
    {"text": "config: acme-4f9a8b7c"},
    {"text": 'pass: pa"ss-w0rd'},
    {"Api-Key": "plain-value"},
    [{"x-api-key": "v"}],
]


@pytest.mark.parametrize("data", ALONE, ids=range(len(ALONE)))
def test_each_kind_of_secret_alone_is_redacted(data: object) -> None:
    # The quoted secret is known only where it is the one looked for: JSON text escapes its quote.
    secrets = ['pa"ss-w0rd'] if "pa" in str(data) else ["acme-4f9a8b7c"]
    scrubbed = scrub(data, secrets)
    assert scrubbed == _scrub(data, secrets) != data


def test_a_report_with_nothing_secret_is_not_copied() -> None:
    data = [{"text": "Refunds take five days.", "n": 3}]
    assert scrub(data, ["acme-4f9a8b7c"]) is data
    assert scrub([{"text": "use sk-abc123"}], []) == [{"text": f"use {REDACTED}"}]


def test_the_key_that_signs_report_shards_is_a_secret_too(monkeypatch):
    """SLAM_SHARD_KEY signs sharded reports (report/seal.py): a recorded text that quotes it is
    scrubbed like an API key."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "shard-signing-key-42")
    assert scrub({"t": "the key is shard-signing-key-42."}) == {"t": "the key is [redacted]."}
