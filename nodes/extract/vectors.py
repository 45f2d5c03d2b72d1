"""Hashed TF-IDF-style n-gram vectors: no model, no vocabulary, stable across processes.

Features are word unigrams, word bigrams and character trigrams of each word (which
match across inflections and typos), hashed with a signed CRC-32 into ``dim`` buckets,
weighted by sublinear term frequency, L2-normalised and stored as int8.
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import Any

import numpy as np
import numpy.typing as npt

from nodes.context import State, Writes
from nodes.extract.terms import STOP_WORDS, words

__all__ = ["MAX_VECTOR_CHARS", "quantize", "text_vector", "turn_vector"]

MAX_VECTOR_CHARS = 20_000  # a vector describes the head of a huge turn; FTS indexes all
_UNIGRAM, _BIGRAM, _TRIGRAM = 1.0, 0.5, 0.25


def _features(text: str) -> Counter[str]:
    tokens = [w for w in words(text[:MAX_VECTOR_CHARS]) if w not in STOP_WORDS]
    feats: Counter[str] = Counter()
    for w in tokens:
        feats["w:" + w] += 1
        padded = f"#{w}#"
        for i in range(len(padded) - 2):
            feats["c:" + padded[i : i + 3]] += 1
    for a, b in zip(tokens, tokens[1:], strict=False):
        feats[f"b:{a} {b}"] += 1
    return feats


def _weight(feature: str) -> float:
    return {"w": _UNIGRAM, "b": _BIGRAM, "c": _TRIGRAM}[feature[0]]


def text_vector(text: str, dim: int) -> npt.NDArray[np.float32]:
    """Unit-length float32 vector (all zeros for a text without words)."""
    feats = _features(text)
    if not feats:
        return np.zeros(dim, dtype=np.float32)
    index = np.empty(len(feats), dtype=np.int64)
    value = np.empty(len(feats), dtype=np.float64)
    for n, (feature, count) in enumerate(feats.items()):
        h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
        index[n] = h % dim
        sign = 1.0 if (h >> 31) & 1 else -1.0
        value[n] = sign * _weight(feature) * (1.0 + np.log(count))
    vec = np.bincount(index, weights=value, minlength=dim)
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        return np.zeros(dim, dtype=np.float32)
    return (vec / norm).astype(np.float32)


def quantize(vec: npt.NDArray[np.float32]) -> bytes:
    """int8 bytes for sqlite-vec: components of a unit vector scaled by 127."""
    return np.clip(np.rint(vec * 127.0), -127, 127).astype(np.int8).tobytes()


def turn_vector(state: State, cfg: dict[str, Any]) -> Writes:
    """Node: the vector of the turn being ingested, as hex of its int8 bytes."""
    vec = text_vector(state.get("turn")["content"], state.ctx.settings.vector_dim)
    return {"vector": quantize(vec).hex()}
