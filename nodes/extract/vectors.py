"""Hashed character n-gram vectors: no model, no vocabulary, stable across processes.

A turn's features are the character trigrams of its content words (``#word#`` padded,
so they match across inflections, compounds and typos: "destress" / "de-stress",
"educaton" / "education"), weighted by sublinear term frequency, plus those of the
two turns before it in its session at lower weight (a turn is about what was just
said). Features are hashed with a signed CRC-32 into ``dim`` buckets (default 128),
L2-normalised and stored as int8. A query's vector is built the same way from its own
words.

Measured on LoCoMo-format conversations (bench/locomo.py, fused with the keyword
list): word unigrams and bigrams on top of trigrams add nothing; 128 buckets rank as
well as 256 or 1024 once fused; the neighbouring turns add a point of MRR and of
recall@1;
weighting the query's words by their document frequency in the store (IDF from the
keyword index's vocabulary) cost a point and a query-time lookup, so it is not done.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypedDict, cast

import numpy as np
import numpy.typing as npt

from nodes.context import RunContext, node
from nodes.extract.terms import content_tokens

__all__ = [
    "CONTEXT_WEIGHTS",
    "MAX_VECTOR_CHARS",
    "quantize",
    "text_vector",
    "turn_vector",
]

MAX_VECTOR_CHARS = 20_000  # a vector describes the head of a huge turn; FTS indexes all
CONTEXT_WEIGHTS = (0.5, 0.3)  # the previous turn, the one before it


def _hashed(feature: str) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
    return h, 1.0 if (h >> 31) & 1 else -1.0


WORD_CACHE = 65_536  # words whose features are kept, per dimension


def _word_features(word: str, dim: int) -> tuple[bytes, bytes, npt.NDArray[np.float64]]:
    """Buckets (int64 bytes) and signs (float64 bytes, and as an array) of a word's
    padded character trigrams."""
    padded = f"#{word}#"
    grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    index = np.empty(len(grams), dtype=np.int64)
    value = np.empty(len(grams), dtype=np.float64)
    for n, gram in enumerate(grams):
        h, sign = _hashed("c:" + gram)  # the trigram feature name of the first vectors
        index[n], value[n] = h % dim, sign
    return index.tobytes(), value.tobytes(), value


# Each word's features, by dimension (kept: word frequencies are Zipfian, so most
# words of a turn were seen before); emptied when it holds WORD_CACHE words.
_known_words: dict[int, dict[str, tuple[bytes, bytes, npt.NDArray[np.float64]]]] = {}


@lru_cache(maxsize=256)
def _own_features(text: str, dim: int) -> npt.NDArray[np.float64]:
    """Bucket weights of a text's own words, before normalisation (cached: a turn is
    vectorised again as the context of the next two turns of its session)."""
    counts = Counter(content_tokens(text))
    if not counts:
        vec = np.zeros(dim, dtype=np.float64)
    else:
        known = _known_words.setdefault(dim, {})
        if len(known) >= WORD_CACHE:
            known.clear()
        index, value = [], []
        for word, count in counts.items():
            features = known.get(word)
            if features is None:
                features = known[word] = _word_features(word[:64], dim)
            index.append(features[0])
            # sublinear term frequency (1 for a word said once: its signs as they are)
            value.append(features[1] if count == 1
                         else (features[2] * (1.0 + math.log(count))).tobytes())
        # every word's features in turn, one bincount over their bytes joined (no
        # array a word to concatenate): a bucket's sum adds them in the same order
        vec = cast(npt.NDArray[np.float64], np.bincount(
            np.frombuffer(b"".join(index), dtype=np.int64),
            weights=np.frombuffer(b"".join(value), dtype=np.float64), minlength=dim))
    vec.flags.writeable = False
    return vec


def text_vector(text: str, dim: int, previous: Sequence[str] = ()) -> npt.NDArray[np.float32]:
    """Unit-length float32 vector of ``text`` (all zeros for a text without words),
    with the turns before it (``previous``, nearest first) at CONTEXT_WEIGHTS."""
    vec = _own_features(text[:MAX_VECTOR_CHARS], dim).copy()
    for turn, weight in zip(previous, CONTEXT_WEIGHTS, strict=False):
        vec += weight * _own_features(turn[:MAX_VECTOR_CHARS], dim)
    norm = math.sqrt(float(vec.dot(vec)))  # np.linalg.norm of a vector, without its checks
    if norm == 0.0:
        return np.zeros(dim, dtype=np.float32)
    return (vec / norm).astype(np.float32)


def quantize(vec: npt.NDArray[np.float32]) -> bytes:
    """int8 bytes for sqlite-vec: components of a unit vector scaled by 127."""
    scaled = np.rint(vec * 127.0)
    # np.clip's bounds, as two ufuncs (np.clip costs more than the rest together)
    return bytes(np.minimum(np.maximum(scaled, -127, out=scaled), 127, out=scaled).astype(
        np.int8).tobytes())


class TurnVectorWrites(TypedDict):
    vector: Any


@node
def turn_vector(previous: Any, turn: Any, *, run: RunContext) -> TurnVectorWrites:
    """Node: the vector of the turn being ingested, as hex of its int8 bytes."""
    previous = (previous or [])[: len(CONTEXT_WEIGHTS)]
    vec = text_vector(turn["content"], run.settings.vector_dim, previous)
    return {"vector": quantize(vec).hex()}
