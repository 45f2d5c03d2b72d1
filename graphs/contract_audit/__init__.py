"""contract_audit: check that the store keeps its promises, reading it in bounded pages.

validate → resolve the scope (whole store or one session) → loop { load one page of
evidence → evaluate the contracts on it } until every pass is read → publish the report
(per contract: pass/fail, counts, violating ids). Read-only.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

# One page is two steps; a million-turn store takes about 600 pages of 5,000 records.
MAX_STEPS = 10_000_000

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "contract_audit",
    "channels": channels("request", "audit", "position", "batch", "findings", "carry",
                         "pages", "report"),
    "nodes": {
        "validate": {"type": "checked_audit"},
        "scope": {"type": "audit_scope"},
        "evidence": {"type": "audit_batch", "batch": 5_000},
        "contracts": {"type": "audit_findings"},
        "report": {"type": "audit_report"},
    },
    "edges": chain(START, "validate", "scope", "evidence", "contracts")
    + chain("report", END),
    "conditional_edges": [
        {"from": "contracts", "condition": "audit_more",
         "routes": {"more": "evidence", "default": "report"}},
    ],
}
