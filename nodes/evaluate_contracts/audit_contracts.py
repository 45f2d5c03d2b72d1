"""Node: evaluate the audit's contracts on one page of evidence.

Each contract keeps a count of what it checked, a count of violations, and the first
``MAX_IDS`` violating ids with a few explanations. Ids are turn (exchange) ids, except
for ``trace_retention`` (stored run sequence numbers). The chain carries one value
from page to page: the hash of the last turn (or tombstone) seen and its session.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.load_evidence.audit_evidence import PASSES
from nodes.publish.wording import counted
from store.provenance import GENESIS, chain_hash

__all__ = ["CONTRACTS", "MAX_DETAILS", "MAX_IDS", "audit_findings", "empty_findings"]

MAX_IDS = 100
MAX_DETAILS = 10

CONTRACTS: dict[str, str] = {
    "turn_hashes": "every turn's content matches its SHA-256 content hash",
    "hash_chain": "every turn's chain hash follows from its metadata and the previous turn "
                  "(or tombstone) of its session; each session's head is its newest turn",
    "brief_sources": "every brief has source turns; each exists in the brief's session and "
                     "matches the content hash the brief recorded",
    "compressed_once": "every compressed turn is a source of exactly one brief, the one it "
                       "names; no uncompressed turn is a brief's source",
    "compression_current": "no session holds STENO_TURN_LIMIT or more uncompressed turns",
    "keyword_index": "the keyword (FTS) index holds exactly the stored turns",
    "vector_index": "the vector index holds exactly the stored turns",
    "derived_keyword_index": "the derived keyword index, when the store has one, holds "
                             "exactly the stored turns, with what is queued for it (SQLite) "
                             "or past its watermark (PostgreSQL)",
    "milestones": "every milestone points at an existing turn of its session",
    "forgotten_derived": "no GraphRAG provenance row, sync origin or NAFE flag cites a "
                         "forgotten turn",
    "trace_retention": "stored stage traces stay within STENO_TRACE_RETENTION (plus one "
                       "prune interval)",
}

Findings = dict[str, dict[str, Any]]


def empty_findings() -> Findings:
    return {name: {"checked": 0, "violations": 0, "ids": [], "details": []}
            for name in CONTRACTS}


def _flag(findings: Findings, contract: str, ident: int | None, detail: str) -> None:
    entry = findings[contract]
    entry["violations"] += 1
    if ident is not None and ident not in entry["ids"] and len(entry["ids"]) < MAX_IDS:
        entry["ids"].append(ident)
    if len(entry["details"]) < MAX_DETAILS:
        entry["details"].append(detail)


def _close_session(findings: Findings, carry: dict[str, Any]) -> None:
    """The session's head must be the hash of its last turn or tombstone."""
    if carry.get("session") is None:
        return
    findings["hash_chain"]["checked"] += 1  # one head per session
    if carry["head"] != carry["hash"]:
        _flag(findings, "hash_chain", carry["last"],
              f"session {carry['session']}: its head is not the hash of its last turn "
              f"#{carry['last']} (a newer turn is missing or the head was altered)")


def _turns(records: list[list[Any]], findings: Findings, carry: dict[str, Any],
           done: bool) -> dict[str, Any]:
    for rec in records:
        kind = rec[0]
        if kind == "headless":
            findings["hash_chain"]["checked"] += 1
            _flag(findings, "hash_chain", None,
                  f"session {rec[1]} has a head but no turns or tombstones")
            continue
        session, ident = rec[1], rec[2]
        if session != carry.get("session"):
            _close_session(findings, carry)
            carry = {"session": session, "hash": GENESIS.hex(), "head": None, "last": None}
        previous = bytes.fromhex(carry["hash"])
        if kind == "gone":
            _, _, _, _content_hash, chain, head, stored = rec
            findings["hash_chain"]["checked"] += 1
            if stored:
                _flag(findings, "hash_chain", ident,
                      f"#{ident} has a tombstone but is still stored")
            carry = {**carry, "hash": chain, "head": head, "last": ident}
            continue
        (_, _, _, name, role, created_at, source_key, trace_id, digest, content_hash, chain,
         brief_id, sources, own, head) = rec
        findings["turn_hashes"]["checked"] += 1
        if digest != content_hash:
            _flag(findings, "turn_hashes", ident,
                  f"#{ident}: its content does not match its content hash")
        findings["hash_chain"]["checked"] += 1
        expected = chain_hash(previous, bytes.fromhex(content_hash or ""), name, role,
                              created_at, source_key, trace_id).hex()
        if chain != expected:
            _flag(findings, "hash_chain", ident,
                  f"#{ident}: its chain hash does not follow from its metadata and the "
                  "previous turn of its session (that turn, or this one, was altered or "
                  "removed)")
        findings["compressed_once"]["checked"] += 1
        if brief_id is not None and (sources != 1 or not own):
            _flag(findings, "compressed_once", ident,
                  f"#{ident} is compressed into brief {brief_id} but is a source of "
                  f"{counted(sources, 'brief')}" + ("" if own else ", not of its own"))
        elif brief_id is None and sources:
            _flag(findings, "compressed_once", ident,
                  f"#{ident} is uncompressed but a source of {counted(sources, 'brief')}")
        carry = {**carry, "hash": chain or "", "head": head, "last": ident}
    if done:
        _close_session(findings, carry)
        carry = {}
    return carry


def _briefs(records: list[list[Any]], findings: Findings) -> None:
    for brief, ident, recorded, exists, actual, same, owner in records:
        findings["brief_sources"]["checked"] += 1
        if ident is None:
            _flag(findings, "brief_sources", None, f"brief {brief} has no source turns")
        elif not exists:
            _flag(findings, "brief_sources", ident,
                  f"brief {brief}: source turn #{ident} does not exist")
        elif recorded != actual or not same:
            _flag(findings, "brief_sources", ident,
                  f"brief {brief}: source turn #{ident} "
                  + ("does not match the hash the brief recorded" if recorded != actual
                     else "belongs to another session"))
        elif owner != brief:
            findings["compressed_once"]["checked"] += 1
            _flag(findings, "compressed_once", ident,
                  f"brief {brief} lists #{ident}, which is "
                  + ("uncompressed" if owner is None else f"compressed into brief {owner}"))


def _indexes(records: list[list[Any]], findings: Findings) -> None:
    for checked, fts_missing, fts_orphans, vec_missing, vec_orphans, *derived in records:
        for contract, missing, orphans, what in (
                ("keyword_index", fts_missing, fts_orphans, "keyword index"),
                ("vector_index", vec_missing, vec_orphans, "vector index"),
                ("derived_keyword_index", *(derived or [[], []]),
                 "derived keyword index")):
            if contract != "derived_keyword_index" or derived:  # a store without one: none
                findings[contract]["checked"] += checked
            repair = ("; `stenographer index rebuild` writes it again"
                      if contract == "derived_keyword_index" else "")
            for ident in missing:
                _flag(findings, contract, ident,
                      f"#{ident} is missing from the {what}{repair}")
            for ident in orphans:
                _flag(findings, contract, ident,
                      f"the {what} holds #{ident}, which is not a stored turn{repair}")


def _milestones(records: list[list[Any]], findings: Findings) -> None:
    for ident, exists, same in records:
        findings["milestones"]["checked"] += 1
        if not exists or not same:
            _flag(findings, "milestones", ident,
                  f"milestone #{ident} " + ("points at no stored turn" if not exists
                                            else "names another session"))


def _forgotten(records: list[list[Any]], findings: Findings) -> None:
    for ident, entity_rows, edge_rows, origins, flags in records:
        findings["forgotten_derived"]["checked"] += 1
        left = [counted(n, what) for n, what in ((entity_rows, "graph entity row"),
                                                 (edge_rows, "graph edge row"),
                                                 (origins, "sync origin row"),
                                                 (flags, "NAFE flag")) if n]
        if left:
            _flag(findings, "forgotten_derived", ident,
                  f"forgotten turn #{ident} is still cited by " + ", ".join(left)
                  + ("; `graphrag reset` then `graphrag extract` rebuilds the graph"
                     if entity_rows or edge_rows else ""))


def _compression(records: list[list[Any]], findings: Findings, first: bool,
                 turn_limit: int) -> None:
    if first and records:
        findings["compression_current"]["checked"] += records[0][0]
        records = records[1:]
    for session, live, ids in records:
        findings["compression_current"]["violations"] += 1
        entry = findings["compression_current"]
        entry["ids"].extend(ids[: MAX_IDS - len(entry["ids"])])
        if len(entry["details"]) < MAX_DETAILS:
            entry["details"].append(
                f"session {session} holds {counted(live, 'uncompressed turn')} "
                f"(limit {turn_limit}); "
                "a compression was interrupted: the next ingest of the session or a "
                "server start finishes it")


def _runs(records: list[list[Any]], findings: Findings) -> None:
    for count, allowed, seqs in records:
        findings["trace_retention"]["checked"] += count
        if count > allowed:
            entry = findings["trace_retention"]
            entry["violations"] += count - allowed
            entry["ids"].extend(seqs)
            entry["details"].append(f"{counted(count, 'trace')} stored; at most {allowed} "
                                    "expected")


class AuditFindingsWrites(TypedDict):
    findings: Any
    carry: Any
    position: Any


@node
def audit_findings(batch: Any, audit: Any, findings: Findings | None,
                   carry: dict[str, Any] | None) -> AuditFindingsWrites:
    findings = findings or empty_findings()
    carry = carry or {}
    name, records, done = batch["pass"], batch["records"], batch["next"] is None
    if name == "turns":
        carry = _turns(records, findings, carry, done)
    elif name == "briefs":
        _briefs(records, findings)
    elif name == "indexes":
        _indexes(records, findings)
    elif name == "milestones":
        _milestones(records, findings)
    elif name == "forgotten":
        _forgotten(records, findings)
    elif name == "compression":
        _compression(records, findings, batch["first"], audit["turn_limit"])
    else:
        _runs(records, findings)
    if not done:
        position: dict[str, Any] | None = {"pass": name, "after": batch["next"]}
    else:
        following = PASSES.index(name) + 1
        position = ({"pass": PASSES[following], "after": None}
                    if following < len(PASSES) else None)
    return {"findings": findings, "carry": carry, "position": position}
