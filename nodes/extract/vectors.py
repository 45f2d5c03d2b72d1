"""Hashed TF-IDF-style n-gram vectors: no model, no vocabulary, stable across processes.

Features are word unigrams, word bigrams and character trigrams of each word (which
match across inflections and typos), hashed with a signed CRC-32 into ``dim`` buckets,
weighted by sublinear term frequency, L2-normalised and stored as int8.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from nodes.context import State, Writes
from nodes.extract.terms import STOP_WORDS, words

__all__ = ["MAX_VECTOR_CHARS", "quantize", "text_vector", "turn_vector"]

MAX_VECTOR_CHARS = 20_000  # a vector describes the head of a huge turn; FTS indexes all
_UNIGRAM, _BIGRAM, _TRIGRAM = 1.0, 0.5, 0.25


def _hashed(feature: str) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
    return h, 1.0 if (h >> 31) & 1 else -1.0


@lru_cache(maxsize=65_536)
def _word_features(word: str, dim: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Buckets and signed weights of a word's unigram and character trigrams (cached:
    word frequencies are Zipfian, so most words of a turn were seen before)."""
    feats = [("w:" + word, _UNIGRAM)]
    padded = f"#{word}#"
    feats += [("c:" + padded[i : i + 3], _TRIGRAM) for i in range(len(padded) - 2)]
    index = np.empty(len(feats), dtype=np.int64)
    value = np.empty(len(feats), dtype=np.float64)
    for n, (feature, weight) in enumerate(feats):
        h, sign = _hashed(feature)
        index[n], value[n] = h % dim, sign * weight
    return index, value


def text_vector(text: str, dim: int) -> npt.NDArray[np.float32]:
    """Unit-length float32 vector (all zeros for a text without words)."""
    tokens = [w for w in words(text[:MAX_VECTOR_CHARS]) if w not in STOP_WORDS]
    if not tokens:
        return np.zeros(dim, dtype=np.float32)
    indexes, values = [], []
    for word, count in Counter(tokens).items():
        index, value = _word_features(word[:64], dim)
        indexes.append(index)
        values.append(value * (1.0 + math.log(count)))  # sublinear term frequency
    pair_index, pair_value = [], []
    for (a, b), count in Counter(zip(tokens, tokens[1:], strict=False)).items():
        h, sign = _hashed(f"b:{a} {b}")
        pair_index.append(h % dim)
        pair_value.append(sign * _BIGRAM * (1.0 + math.log(count)))
    indexes.append(np.array(pair_index, dtype=np.int64))
    values.append(np.array(pair_value, dtype=np.float64))
    vec = np.bincount(np.concatenate(indexes), weights=np.concatenate(values), minlength=dim)
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        return np.zeros(dim, dtype=np.float32)
    return (vec / norm).astype(np.float32)


def quantize(vec: npt.NDArray[np.float32]) -> bytes:
    """int8 bytes for sqlite-vec: components of a unit vector scaled by 127."""
    return bytes(np.clip(np.rint(vec * 127.0), -127, 127).astype(np.int8).tobytes())


def turn_vector(state: State, cfg: Mapping[str, Any]) -> Writes:
    """Node: the vector of the turn being ingested, as hex of its int8 bytes."""
    vec = text_vector(state.get("turn")["content"], state.ctx.settings.vector_dim)
    return {"vector": quantize(vec).hex()}
