"""Nodes: communities and centrality of the whole graph, a query's ranked
neighbourhood, and the representative sentences of a community (all extractive)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from nodes.context import RunContext, node
from nodes.extract.entities import mentions
from nodes.extract.graph_algorithms import QUERY_DAMPING, louvain, pagerank, pair_weights
from nodes.extract.sentences import sentences

__all__ = ["community_sentences", "detected_communities", "ranked_neighbourhood"]

MAX_SENTENCES = 5
SNIPPET_CHARS = 240


def _indexed(entities: list[Any], edges: list[Any], total: int
             ) -> tuple[list[str], dict[int, int], dict[tuple[int, int], float]]:
    """Keys in key order, entity id -> index, and undirected weights by index pair
    (summed in key order, so that ids never affect the floating-point result)."""
    ordered = sorted(entities, key=lambda e: e[1])
    keys = [str(e[1]) for e in ordered]
    index = {int(e[0]): i for i, e in enumerate(ordered)}
    turns = {index[int(e[0])]: int(e[2]) for e in ordered}
    mapped = sorted((index[int(s)], index[int(d)], str(k), int(n)) for s, d, k, n in edges
                    if int(s) in index and int(d) in index)
    return keys, index, pair_weights(mapped, turns, total)


def _arrays(weights: Mapping[tuple[int, int], float]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = sorted(weights)
    rows = np.array([a for a, _ in pairs], dtype=np.int64)
    cols = np.array([b for _, b in pairs], dtype=np.int64)
    return rows, cols, np.array([weights[p] for p in pairs], dtype=np.float64)


class DetectedCommunitiesWrites(TypedDict):
    seed: Any
    detection: Any
    ranks: Any
    communities: Any


@node
def detected_communities(graph: Any, graph_entities: Any, graph_edges: Any, *,
                         run: RunContext) -> DetectedCommunitiesWrites:
    """Louvain communities (seeded) and PageRank centrality of every entity."""
    settings = run.settings
    seed, resolution = settings.graphrag_seed, settings.graphrag_resolution
    entities = [(e[0], e[1], e[2]) for e in graph_entities]
    keys, index, weights = _indexed(entities, graph_edges, graph["turns_read"])
    started = time.perf_counter()
    groups = louvain(keys, weights, seed, resolution)
    louvain_ms = (time.perf_counter() - started) * 1e3
    rank = pagerank(len(keys), *_arrays(weights))
    community_of = {i: n for n, group in enumerate(groups, start=1) for i in group}
    ids = {i: entity_id for entity_id, i in index.items()}
    ranks = [(community_of.get(i), float(rank[i]), ids[i]) for i in range(len(keys))]
    labels = []
    for n, group in enumerate(groups, start=1):
        top = sorted(group, key=lambda i: (-rank[i], keys[i]))[:3]
        labels.append((n, len(group), " · ".join(keys[i] for i in top)))
    detection = {"algorithm": "louvain", "seed": seed, "resolution": resolution,
                 "communities": len(groups), "nodes": len(keys), "weighted_pairs": len(weights),
                 "louvain_ms": round(louvain_ms, 1)}
    return {"seed": seed, "detection": detection, "ranks": ranks, "communities": labels}


class RankedNeighbourhoodWrites(TypedDict):
    ranked: Any
    top_entities: Any
    top_relations: Any


@node
def ranked_neighbourhood(graph_query: Any, neighbourhood: Any, hood_entities: Any, hood_edges: Any,
                         seeds: Any) -> RankedNeighbourhoodWrites:
    """Personalised PageRank over the neighbourhood, teleporting to the query's
    entities (rarer entities weigh more); the top entities and relations."""
    query = graph_query
    total_read = neighbourhood["turns_read"]
    entities: dict[int, Any] = hood_entities
    edges: list[Any] = hood_edges
    seeds = {s[0] for s in seeds or []}
    if not entities:
        return {"ranked": {"entities": 0, "relations": 0}, "top_entities": [],
                "top_relations": []}
    rows = [(e[0], e[1], e[4]) for e in entities.values()]
    keys, index, weights = _indexed(rows, [(s, d, k, n) for _, s, d, k, n in edges],
                                    total_read)
    personal = np.zeros(len(keys))
    total = max(1, total_read)
    for entity_id in seeds:
        if entity_id in index:
            personal[index[entity_id]] = np.log1p(total / max(1, entities[entity_id][4]))
    rank = pagerank(len(keys), *_arrays(weights), personal=personal, damping=QUERY_DAMPING,
                    tolerance=1e-6)
    ids = {i: entity_id for entity_id, i in index.items()}
    order = sorted(range(len(keys)), key=lambda i: (-rank[i], keys[i]))[:query["limit"]]
    top = [(ids[i], float(rank[i])) for i in order]
    chosen = {entity_id for entity_id, _ in top}
    relations = sorted(
        (e for e in edges if e[1] in chosen and e[2] in chosen),
        key=lambda e: (-(rank[index[e[1]]] + rank[index[e[2]]]) * e[4], e[3], keys[index[e[1]]],
                       keys[index[e[2]]]))[:query["limit"]]
    return {"ranked": {"entities": len(top), "relations": len(relations)},
            "top_entities": top, "top_relations": relations}


class CommunitySentencesWrites(TypedDict):
    sentences: Any


@node
def community_sentences(community: Any, community_turns: Any) -> CommunitySentencesWrites:
    """The 3-5 sentences of the community's supporting turns that name the most of its
    entities, each citing its turn (verbatim, at most one per turn)."""
    turns = community_turns
    keys = set(community["keys"])
    scored = []
    for turn_id in sorted(turns):
        best: tuple[int, str] | None = None
        for sentence in sentences(turns[turn_id].content, SNIPPET_CHARS * 2):
            named = len({m[0] for m in mentions(sentence)} & keys)
            if named and (best is None or named > best[0]):
                best = (named, sentence)
        if best is not None:
            scored.append((-best[0], turn_id, best[1]))
    scored.sort()
    picked = [{"exchange_id": turn_id, "session_id": turns[turn_id].session,
               "text": text[:SNIPPET_CHARS], "entities": -named}
              for named, turn_id, text in scored[:MAX_SENTENCES]]
    return {"sentences": picked}
