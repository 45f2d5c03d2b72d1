"""Node: the ingest reply, whose first line stays compatible with the original server.

``Ingested [<role>] #<id> (<N> chars; decisions: D; blockers: B[; redacted: R]
[; ⚠ NAFE:<SIG>[,<SIG>]]; trace:<id>)`` as the original wrote it (NAFE and trace
inside the parentheses), then ``| Compressed K turns → brief <id> (tier-X)``, then
``| CLAEG terminal shutdown from <source> at <time> → #<id> (milestone)`` for each
shutdown event of the session that this ingest recorded from the coordination bus.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.extract.nafe import SIGNATURES
from nodes.publish.wording import plural

__all__ = ["ingest_reply"]


def _signatures(flags: list[dict[str, Any]]) -> list[str]:
    """The flagged signatures, once each, in the stable SIGNATURES order."""
    present = {f["signature"] for f in flags}
    return [sig for sig in SIGNATURES if sig in present]


class IngestReplyWrites(TypedDict):
    reply: Any


@node
def ingest_reply(turn: Any, recorded: Any, decisions: Any, blockers: Any, briefs: Any, flags: Any,
                 redacted: Any, shutdowns: Any) -> IngestReplyWrites:
    rec = recorded
    decisions, blockers = decisions or [], blockers or []
    briefs = briefs or []
    flags, redacted = flags or [], redacted or []
    if rec["duplicate"]:
        text = f"Already captured #{rec['exchange_id']} (source_key {turn['source_key']!r})"
        decisions, blockers, flags, redacted = [], [], [], []
    else:
        nafe = _signatures(flags)
        text = (
            f"Ingested [{turn['role']}] #{rec['exchange_id']} ({len(turn['content'])} chars; "
            f"decisions: {len(decisions)}; blockers: {len(blockers)}"
            + (f"; redacted: {len(redacted)}" if redacted else "")
            + (f"; ⚠ NAFE:{','.join(nafe)}" if nafe else "")
            + f"; trace:{rec['trace_id']})"
        )
        for b in briefs:
            text += (f" | Compressed {b['turns']} {plural(b['turns'], 'turn')} → brief {b['id']} "
                     f"(tier-{b['tier']})")
    shutdowns = shutdowns or []
    for s in (s for s in shutdowns if s["new"]):  # else only its receipt was late
        text += (f" | CLAEG terminal shutdown from {s['source']} at {s['at']} → "
                 f"#{s['exchange_id']} (milestone)")
    return {
        "reply": {
            "text": text,
            "exchange_id": rec["exchange_id"],
            "session_id": turn["session"],
            "role": turn["role"],
            "chars": len(turn["content"]),
            "duplicate": rec["duplicate"],
            "decisions": decisions,
            "blockers": blockers,
            "compressed": briefs,
            "trace_id": rec["trace_id"],
            "redacted": len(redacted),
            "redacted_kinds": sorted(set(redacted)),
            "nafe": _signatures(flags),
            "flags": [{"signature": f["signature"], "span": f["span"]} for f in flags],
            "shutdowns": shutdowns,
        }
    }
