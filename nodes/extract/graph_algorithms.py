"""Weights, centrality and communities of the knowledge graph (numpy and networkx).

* weight of an edge: co-occurrences by normalised PMI (clipped to 0.05..1, so that a
  pair seen once among rare entities is not worth more than a strong one); a typed
  relation counts 1 per kind; an undirected pair sums its kinds.
* centrality: PageRank by numpy power iteration over the weighted graph (sparse sums
  with ``np.bincount``; dangling mass goes back to the teleport vector). The same
  function personalised on a query's entities ranks their neighbourhood.
* communities: networkx's Louvain with the seed and resolution from the settings, on
  a graph whose nodes and edges are added in key order, so the same store and seed
  give the same communities. A graph without edges has no communities (Louvain is
  not called on it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np

__all__ = ["DAMPING", "QUERY_DAMPING", "louvain", "pagerank", "pair_weights"]

DAMPING = 0.85
# A query's walk returns to its entities more often: their close neighbours matter,
# and the entities named stay ahead of a hub one link away.
QUERY_DAMPING = 0.5
MIN_WEIGHT = 0.05
_ITERATIONS = 100
_TOLERANCE = 1e-10


def _npmi(n_ab: int, n_a: int, n_b: int, total: int) -> float:
    if total <= 0 or n_a <= 0 or n_b <= 0 or n_ab <= 0:
        return MIN_WEIGHT
    p_ab = min(1.0, n_ab / total)
    if p_ab >= 1.0:
        return 1.0
    pmi = math.log(p_ab / ((n_a / total) * (n_b / total)))
    return min(1.0, max(MIN_WEIGHT, pmi / -math.log(p_ab)))


def pair_weights(edges: Sequence[tuple[int, int, str, int]], turns: Mapping[int, int],
                 total: int) -> dict[tuple[int, int], float]:
    """Undirected weights keyed by (smaller id, larger id)."""
    out: dict[tuple[int, int], float] = {}
    for src, dst, kind, n in edges:
        if src == dst:
            continue
        w = (_npmi(n, turns.get(src, 0), turns.get(dst, 0), total) if kind == "co_occurs"
             else 1.0)
        pair = (src, dst) if src < dst else (dst, src)
        out[pair] = out.get(pair, 0.0) + w
    return out


def pagerank(n: int, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray,
             personal: np.ndarray | None = None, damping: float = DAMPING,
             tolerance: float = _TOLERANCE) -> np.ndarray:
    """PageRank of an undirected weighted graph of ``n`` nodes given by its edge list
    (each pair once); ``personal`` (non-negative, any scale) personalises it."""
    if n == 0:
        return np.zeros(0)
    teleport = np.full(n, 1.0 / n) if personal is None or personal.sum() <= 0 \
        else personal / personal.sum()
    src = np.concatenate([rows, cols])
    dst = np.concatenate([cols, rows])
    w = np.concatenate([weights, weights]).astype(np.float64)
    out_weight = np.bincount(src, weights=w, minlength=n)
    dangling = out_weight == 0
    share = np.divide(w, out_weight[src], out=np.zeros_like(w), where=out_weight[src] > 0)
    rank = teleport.copy()
    for _ in range(_ITERATIONS):
        spread = np.bincount(dst, weights=rank[src] * share, minlength=n)
        new = damping * (spread + rank[dangling].sum() * teleport) + (1 - damping) * teleport
        if np.abs(new - rank).sum() < tolerance:
            rank = new
            break
        rank = new
    return rank


def louvain(keys: Sequence[str], weights: Mapping[tuple[int, int], float], seed: int,
            resolution: float) -> list[list[int]]:
    """Communities of two or more nodes (node indexes into ``keys``), each sorted,
    ordered by size then by their first key; ``weights`` is keyed by index pairs."""
    if not weights:
        return []
    graph = nx.Graph()
    graph.add_nodes_from(sorted({i for pair in weights for i in pair}, key=lambda i: keys[i]))
    graph.add_weighted_edges_from(
        (a, b, w) for (a, b), w in sorted(weights.items(), key=lambda x: (keys[x[0][0]],
                                                                         keys[x[0][1]])))
    found = nx.community.louvain_communities(graph, weight="weight", resolution=resolution,
                                             seed=seed)
    groups = [sorted(c, key=lambda i: keys[i]) for c in found if len(c) > 1]
    groups.sort(key=lambda c: (-len(c), keys[c[0]]))
    return groups
