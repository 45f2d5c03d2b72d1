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

A turn's bytes come two ways, the same bytes either way: with numpy (``text_vector``,
``quantize``: a query's vector, and a turn's in a process that has imported numpy), and
in plain Python (``_plain_bytes``) in a process that has not. Importing numpy costs
50-80 ms of CPU, the plain way about 40 µs a turn more (72-76 against 37-44 µs warm), so a
process vectorises its first ``PLAIN_TURNS`` turns without it (a server's turns before
its warm-up imports numpy, a hook's capture of a few messages: numpy's import is most of
what the first ingest of a new server costs) and imports it then: never more than the
import's cost spent on the plain way. Both ways sum each bucket's features in the same
order, take the norm as the square root of the correctly rounded sum of the squares
(``math.fsum``: BLAS sums them in an order of its own), round the unit vector and its
product by 127 to float32 as numpy does and round half to even
(tests/nodes/extract/test_vectors.py compares them byte for byte).
"""

from __future__ import annotations

import math
import operator
import sys
import zlib
from array import array
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from nodes.context import RunContext, node
from nodes.extract.terms import content_tokens

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CONTEXT_WEIGHTS",
    "MAX_VECTOR_CHARS",
    "PLAIN_TURNS",
    "quantize",
    "text_vector",
    "turn_bytes",
    "turn_vector",
]

MAX_VECTOR_CHARS = 20_000  # a vector describes the head of a huge turn; FTS indexes all
CONTEXT_WEIGHTS = (0.5, 0.3)  # the previous turn, the one before it


def _grams(word: str, dim: int) -> tuple[tuple[int, float], ...]:
    """(bucket, sign) of each of a word's padded character trigrams, in order."""
    padded = f"#{word}#"
    grams = []
    for i in range(len(padded) - 2):
        # the trigram feature name of the first vectors; a signed CRC-32
        h = zlib.crc32(("c:" + padded[i : i + 3]).encode("utf-8", "surrogatepass"))
        grams.append((h % dim, 1.0 if (h >> 31) & 1 else -1.0))
    return tuple(grams)


WORD_CACHE = 65_536  # words whose features are kept, per dimension


def _word_features(word: str, dim: int) -> tuple[bytes, bytes, npt.NDArray[np.float64]]:
    """Buckets (int64 bytes) and signs (float64 bytes, and as an array) of a word's
    padded character trigrams."""
    import numpy as np

    grams = _grams(word, dim)
    value = np.array([sign for _, sign in grams], dtype=np.float64)
    return np.array([b for b, _ in grams], dtype=np.int64).tobytes(), value.tobytes(), value


# Each word's features, by dimension (kept: word frequencies are Zipfian, so most
# words of a turn were seen before); emptied when it holds WORD_CACHE words. numpy's
# way keeps them as bytes and arrays, the plain way as (bucket, sign) pairs.
_known_words: dict[int, dict[str, tuple[bytes, bytes, npt.NDArray[np.float64]]]] = {}
_plain_words: dict[int, dict[str, tuple[tuple[int, float], ...]]] = {}

_T = TypeVar("_T")


def _words_of(caches: dict[int, dict[str, _T]], dim: int) -> dict[str, _T]:
    """The word cache of ``dim`` in ``caches``, emptied first when it is full."""
    known = caches.setdefault(dim, {})
    if len(known) >= WORD_CACHE:
        known.clear()
    return known


@lru_cache(maxsize=256)
def _own_features(text: str, dim: int) -> npt.NDArray[np.float64]:
    """Bucket weights of a text's own words, before normalisation (cached: a turn is
    vectorised again as the context of the next two turns of its session)."""
    import numpy as np

    counts = Counter(content_tokens(text))
    if not counts:
        vec = np.zeros(dim, dtype=np.float64)
    else:
        known = _words_of(_known_words, dim)
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
        vec = cast("npt.NDArray[np.float64]", np.bincount(
            np.frombuffer(b"".join(index), dtype=np.int64),
            weights=np.frombuffer(b"".join(value), dtype=np.float64), minlength=dim))
    vec.flags.writeable = False
    return vec


def text_vector(text: str, dim: int, previous: Sequence[str] = ()) -> npt.NDArray[np.float32]:
    """Unit-length float32 vector of ``text`` (all zeros for a text without words),
    with the turns before it (``previous``, nearest first) at CONTEXT_WEIGHTS."""
    import numpy as np

    vec = _own_features(text[:MAX_VECTOR_CHARS], dim).copy()
    for turn, weight in zip(previous, CONTEXT_WEIGHTS, strict=False):
        vec += weight * _own_features(turn[:MAX_VECTOR_CHARS], dim)
    norm = math.sqrt(math.fsum((vec * vec).tolist()))
    if norm == 0.0:
        return np.zeros(dim, dtype=np.float32)
    return (vec / norm).astype(np.float32)


def quantize(vec: npt.NDArray[np.float32]) -> bytes:
    """int8 bytes for sqlite-vec: components of a unit vector scaled by 127."""
    import numpy as np

    scaled = np.rint(vec * 127.0)
    # np.clip's bounds, as two ufuncs (np.clip costs more than the rest together)
    return bytes(np.minimum(np.maximum(scaled, -127, out=scaled), 127, out=scaled).astype(
        np.int8).tobytes())


@lru_cache(maxsize=256)
def _plain_own(text: str, dim: int) -> tuple[float, ...]:
    """``_own_features`` in plain Python: the same sums in the same order."""
    vec = [0.0] * dim
    known = _words_of(_plain_words, dim)
    for word, count in Counter(content_tokens(text)).items():
        grams = known.get(word)
        if grams is None:
            grams = known[word] = _grams(word[:64], dim)
        if count == 1:
            for bucket, sign in grams:
                vec[bucket] += sign
        else:
            weight = 1.0 + math.log(count)
            for bucket, sign in grams:
                vec[bucket] += sign * weight
    return tuple(vec)


def _plain_bytes(text: str, dim: int, previous: Sequence[str] = ()) -> bytes:
    """``quantize(text_vector(text, dim, previous))`` without numpy."""
    vec: Sequence[float] = _plain_own(text[:MAX_VECTOR_CHARS], dim)
    for turn, weight in zip(previous, CONTEXT_WEIGHTS, strict=False):
        context = _plain_own(turn[:MAX_VECTOR_CHARS], dim)
        vec = [v + weight * c for v, c in zip(vec, context, strict=False)]  # both dim long
    norm = math.sqrt(math.fsum(map(operator.mul, vec, vec)))
    if norm == 0.0:
        return bytes(dim)
    unit = array("f", [v / norm for v in vec])  # float32, as numpy's astype rounds
    # float32 products, as numpy's; no component of a unit vector passes 127, since the
    # norm is no less than any component, so quantize's clip changes none
    return array("b", map(round, array("f", [u * 127.0 for u in unit]))).tobytes()


# Turns a process vectorises in plain Python before it imports numpy (module docstring).
PLAIN_TURNS = 1_500
_plain_left = [PLAIN_TURNS]


def turn_bytes(text: str, dim: int, previous: Sequence[str] = ()) -> bytes:
    """A turn's int8 vector bytes (with the turns before it, nearest first): numpy's
    way once it is imported or this process has vectorised ``PLAIN_TURNS`` turns, the
    plain way before that. The two give the same bytes."""
    if "numpy" not in sys.modules and _plain_left[0] > 0:
        _plain_left[0] -= 1
        return _plain_bytes(text, dim, previous)
    return quantize(text_vector(text, dim, previous))


class TurnVectorWrites(TypedDict):
    vector: Any


@node
def turn_vector(previous: Any, turn: Any, *, run: RunContext) -> TurnVectorWrites:
    """Node: the vector of the turn being ingested, as hex of its int8 bytes."""
    previous = (previous or [])[: len(CONTEXT_WEIGHTS)]
    return {"vector": turn_bytes(turn["content"], run.settings.vector_dim, previous).hex()}
