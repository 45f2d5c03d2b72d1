"""Node: reciprocal rank fusion of the keyword and vector candidate lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes

__all__ = ["RRF_K", "fused_hits", "rrf"]

RRF_K = 60


def rrf(lists: list[tuple[list[list[Any]], float]], k: int = RRF_K) -> list[list[Any]]:
    """[(hits, weight)] -> [[id, score]] best first; ties broken by older id first."""
    scores: dict[int, float] = {}
    for hits, weight in lists:
        for rank, (exchange_id, _) in enumerate(hits, start=1):
            scores[exchange_id] = scores.get(exchange_id, 0.0) + weight / (k + rank)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [[i, round(s, 8)] for i, s in ranked]


def fused_hits(state: State, cfg: Mapping[str, Any]) -> Writes:
    lists = [
        (state.get("keyword") or [], float(cfg.get("keyword_weight", 1.0))),
        (state.get("semantic") or [], float(cfg.get("vector_weight", 1.0))),
    ]
    return {"ranked": rrf([(hits, w) for hits, w in lists if hits])}
