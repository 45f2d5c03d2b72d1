"""graphrag_*: the knowledge graph of the work, built and read without a language model.

graphrag_batch        validate → load the next pending turns (per-session cursors) and
                      the turn before each session's first (and, for a worker process
                      to extract meanwhile, the batch after) → extract entities,
                      co-occurrences and typed relations → check provenance → publish
                      the batch and move the cursors (one transaction)
graphrag_communities  load the whole graph → seeded Louvain communities and PageRank
                      centrality (the seed is written to the trace) → publish
graphrag_extract      (`stenographer graphrag extract`) validate → the batch stages above,
                      then count the batch; again from load while turns are pending →
                      the graph's counts → when the communities are stale, the
                      communities stages above → reply. Each batch commits with its
                      cursors, so an interrupted run loses at most the batch in flight.
graph_query           validate → the entities the query names → their neighbourhood
                      (hops) → personalised PageRank → supporting turns → reply
                      (stenographer_graph_query)
graphrag_community    validate → one community (its entities, relations, turns, sentences)
                      when an id is given, else a page of communities
graphrag_stats / graphrag_export / graphrag_reset
                      the operator's reads and the reset (`stenographer graphrag`)

Each graph a tool or command runs answers in its ``reply`` channel.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels, linear

__all__ = ["BATCH", "COMMUNITIES", "COMMUNITY", "DEFINITIONS", "EXPORT",
           "EXTRACT", "MAX_STEPS", "QUERY", "RESET", "STATS"]

# A whole extraction loops once per batch (6 steps each): a store of millions of turns
# read in small batches stays far below this.
MAX_STEPS = 10_000_000

_BATCH_CHANNELS = ("batch_request", "batch", "pending", "window", "skipped", "lookahead",
                   "lookahead_window", "extracted", "extracted_in", "records", "provenance",
                   "published")
_BATCH_NODES = {
    "validate": {"type": "checked_graph_batch"},
    "load": {"type": "graph_batch_turns"},
    "extract": {"type": "graph_records"},
    "contract": {"type": "graph_batch_contract"},
    "publish": {"type": "published_graph_batch"},
}
_COMMUNITY_CHANNELS = ("graph", "graph_entities", "graph_edges", "seed", "detection", "ranks",
                       "communities", "communities_written")
_COMMUNITY_NODES = {
    "load": {"type": "whole_graph_evidence"},
    "detect": {"type": "detected_communities"},
    "publish": {"type": "published_communities"},
}

BATCH = {
    "schema_version": SCHEMA_VERSION,
    "name": "graphrag_batch",
    "channels": channels("request", *_BATCH_CHANNELS),
    "nodes": _BATCH_NODES,
    "edges": chain(START, "validate", "load", "extract", "contract", "publish", END),
}

COMMUNITIES = {
    "schema_version": SCHEMA_VERSION,
    "name": "graphrag_communities",
    "channels": channels("request", *_COMMUNITY_CHANNELS),
    "nodes": _COMMUNITY_NODES,
    "edges": chain(START, "load", "detect", "publish", END),
}

EXTRACT = {
    "schema_version": SCHEMA_VERSION,
    "name": "graphrag_extract",
    "channels": channels("request", *_BATCH_CHANNELS, "tally", "stats", *_COMMUNITY_CHANNELS,
                         "reply"),
    "nodes": {
        **_BATCH_NODES,
        "tally": {"type": "extraction_tally"},
        "stats": {"type": "graph_stats"},
        **{f"{name}_communities": node for name, node in _COMMUNITY_NODES.items()},
        "reply": {"type": "extraction_reply"},
    },
    "edges": chain(START, "validate", "load", "extract", "contract", "publish", "tally")
    + chain("load_communities", "detect_communities", "publish_communities", "reply", END),
    "conditional_edges": [
        {"from": "tally", "condition": "turns_pending",
         "routes": {"more": "load", "default": "stats"}},
        {"from": "stats", "condition": "communities_stale",
         "routes": {"stale": "load_communities", "default": "reply"}},
    ],
}

QUERY = linear(
    "graph_query",
    channels("request", "graph_query", "seeds", "neighbourhood", "hood_entities",
                         "hood_edges", "ranked", "top_entities", "top_relations",
                         "graph_result", "reply"),
    validate="checked_graph_query",
    seeds="graph_seeds",
    neighbourhood="graph_neighbourhood",
    rank="ranked_neighbourhood",
    support="graph_support",
    reply="graph_query_text",
)

STATS = linear(
    "graphrag_stats",
    channels("request", "stats", "reply"),
    load="graph_stats",
    reply="graph_stats_text",
)

COMMUNITY = {
    "schema_version": SCHEMA_VERSION,
    "name": "graphrag_community",
    "channels": channels("request", "wanted", "listing", "communities", "total",
                         "community_id", "community", "community_turns", "sentences", "reply"),
    "nodes": {
        "validate": {"type": "checked_community_request"},
        "page": {"type": "checked_listing", "default_limit": 20},
        "list": {"type": "community_list"},
        "list_reply": {"type": "communities_text"},
        "ref": {"type": "checked_community_ref"},
        "load": {"type": "community_evidence"},
        "sentences": {"type": "community_sentences"},
        "reply": {"type": "community_text"},
    },
    "edges": chain(START, "validate") + chain("page", "list", "list_reply", END)
    + chain("ref", "load", "sentences", "reply", END),
    "conditional_edges": [
        {"from": "validate", "condition": "wanted", "routes": {"one": "ref", "list": "page"}},
    ],
}

EXPORT = linear(
    "graphrag_export",
    channels("request", "export", "rows", "export_entities", "export_edges",
                         "detection", "exported", "reply"),
    validate="checked_graph_export",
    load="export_rows",
    render="exported_graph",
)

RESET = linear(
    "graphrag_reset",
    channels("request", "confirmed", "reply"),
    validate="checked_graph_reset",
    reset="graph_reset",
)

DEFINITIONS = [BATCH, COMMUNITIES, EXTRACT, QUERY, STATS, COMMUNITY, EXPORT, RESET]
