"""Node: one ranking from the keyword, hashed-vector and provider candidate lists.

Score fusion: each list's scores are brought to a common scale and added with a
weight. BM25 scores are divided by the list's best (1.0 for the best keyword match);
hashed-vector cosines are used as they are (a weak, fuzzy signal: 0.3 of a perfect
keyword match at most); provider cosines, whose floor differs by model, are scaled
between the list's worst and best.

Measured on LoCoMo-format conversations (bench/locomo.py): reciprocal rank fusion
(k = 60, equal weights) let the weak hashed list pull good keyword hits down (recall@10
0.48 against 0.63 for keywords alone); weighted RRF (vector weight 0.3, k 10-60) still
lost 1-4 points to score fusion, which keeps how far apart the keyword scores are.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Sequence
from operator import itemgetter
from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.extract.embedding_config import embedding_config

__all__ = ["VECTOR_WEIGHT", "fused", "fused_hits", "hit_match", "listed_ids", "rounded"]

VECTOR_WEIGHT = 0.3
_FIRST = itemgetter(0)


def _by_best(hits: Sequence[Sequence[Any]]) -> dict[int, float]:
    best = max((float(s) for _, s in hits), default=0.0)
    return {int(i): float(s) / best for i, s in hits} if best > 0 else {}


def _by_range(hits: Sequence[Sequence[Any]]) -> dict[int, float]:
    if not hits:
        return {}
    values = [float(s) for _, s in hits]
    low, high = min(values), max(values)
    if high <= low:
        return {int(i): 1.0 for i, _ in hits}
    return {int(i): (float(s) - low) / (high - low) for i, s in hits}


def fused(keyword: Sequence[Sequence[Any]], semantic: Sequence[Sequence[Any]],
          provider: Sequence[Sequence[Any]] = (), *, vector_weight: float = VECTOR_WEIGHT,
          provider_weight: float = 1.0) -> list[list[Any]]:
    """[[id, score]] best first (ties: older id first)."""
    scores = _by_best(keyword)  # weight 1.0
    parts = (({int(i): float(s) for i, s in semantic}, vector_weight),
             (_by_range(provider), provider_weight))
    for values, weight in parts:
        for exchange_id, value in values.items():
            scores[exchange_id] = scores.get(exchange_id, 0.0) + weight * value
    ranked = sorted(scores)  # by id, then (stable) by score: ties keep id order
    ranked.sort(key=scores.__getitem__, reverse=True)
    kept = [i for i in ranked if scores[i] > 0.0]
    return [[i, s] for i, s in zip(kept, rounded([scores[i] for i in kept], 8), strict=True)]


_MANY = 32  # values: from here numpy's rounding costs less than ``round`` one by one
_HALVES_EXACT = 2.0**52  # below it every half-integer is a double


def rounded(values: Sequence[float], digits: int) -> list[float]:
    """``[round(v, digits) for v in values]``: the same doubles, about a fifth of the CPU
    for a list of a hundred or more when numpy is loaded (the vector stages load it; a
    graph without them, the hook's briefing, rounds one by one instead of importing it).

    ``round`` gives the double nearest to ``n / 10**digits``, n the integer nearest to
    the exact ``v * 10**digits`` (ties to even). Here that product is rounded to a
    double first; below 2**52 every half-integer is a double, so the rounding cannot
    carry the product across one: unless it lands exactly on a half, its nearest integer
    is n, and n (exact) divided by 10**digits (exact) is correctly rounded, the same
    double. Products on a half, huge ones, NaN and infinities are left to ``round``."""
    np = sys.modules.get("numpy")
    if np is None or len(values) < _MANY:
        return [round(v, digits) for v in values]
    scale = 10.0**digits
    scaled = np.array(values, dtype=np.float64) * scale
    small = np.abs(scaled) < _HALVES_EXACT  # False for NaN and infinities too
    scaled = np.where(small, scaled, 0.0)
    near = np.rint(scaled)
    sure = small & (np.abs(scaled - near) != 0.5)
    out: list[float] = (near / scale).tolist()
    if not sure.all():
        for at in np.flatnonzero(~sure).tolist():
            out[at] = round(values[at], digits)
    return out


class FusedHitsWrites(TypedDict):
    ranked: Any


@node
def fused_hits(keyword: Any, semantic: Any = None, provider: Any = None, *, run: RunContext,
               cfg: Cfg) -> FusedHitsWrites:
    config = embedding_config(run.settings)
    return {"ranked": fused(
        keyword or [], semantic or [], provider or [],
        vector_weight=float(cfg.get("vector_weight", VECTOR_WEIGHT)),
        provider_weight=config.weight if config is not None else 0.0)}


def listed_ids(*lists: Sequence[Sequence[Any]] | None) -> set[int]:
    """The exchange ids of candidate lists ([[id, score]], the ids ints)."""
    out: set[int] = set()
    for hits in lists:
        if hits:
            out.update(map(_FIRST, hits))
    return out


def hit_match(exchange_ids: Iterable[int], keyword_ids: Collection[int],
              similar_ids: Collection[int]) -> str:
    """Why a hit (a turn, or a brief by its source turns) is ranked: "keyword" (the
    keyword index matched a word of the query in it, in its neighbours' context or in
    its date), else "vector" (only the vector lists ranked it: similar spelling or
    meaning, no word in common), else "answer" (only the share of the score that the
    question before it lent it)."""
    ids = set(exchange_ids)
    if not ids.isdisjoint(keyword_ids):
        return "keyword"
    return "vector" if not ids.isdisjoint(similar_ids) else "answer"
