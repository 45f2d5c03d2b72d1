"""migrate: copy a whole store into another, page after page, then audit the copy
(`stenographer migrate`).

The run's context holds both stores: ``source`` is read, ``store`` (the target) written.
validate → plan (the target's progress row: a new copy into an empty target, or where an
interrupted one stopped; anything else is refused; and whether the operator asked to
stop) → read the next page of the table being copied from the source → for turns:
verify their content and chain hashes, then rebuild their keyword index fields → write
the page and move the progress row (one transaction of the target) → plan again, until
the copy is done or a stop was asked → the copy's summary → when the copy is done, the
contract audit of the target (its stages, inlined) → reply (the summary and the audit).
"""

from graphs.contract_audit import CHANNELS as AUDIT_CHANNELS
from graphs.contract_audit import audit_stages
from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["DEFINITION", "MAX_STEPS"]

# Five steps a page and two a page of the audit: a store of millions of turns copied in
# small pages stays far below this.
MAX_STEPS = 10_000_000

_audit_nodes, _audit_edges, _audit_routes = audit_stages("audit_", then="reply")

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "migrate",
    "channels": channels("migration", "progress", "claimed", "resumed", "stopped", "page",
                         "rows", "evidence", "verified", "fields", "written", "migrated",
                         *AUDIT_CHANNELS, "reply"),
    "nodes": {
        "validate": {"type": "checked_migration"},
        "plan": {"type": "migration_plan"},
        "read": {"type": "migration_page"},
        "verify": {"type": "verified_turns"},
        "fields": {"type": "migration_fields"},
        "write": {"type": "copied_page"},
        "copied": {"type": "migration_reply"},
        **_audit_nodes,
        "reply": {"type": "migrate_reply"},
    },
    "edges": chain(START, "validate", "plan") + chain("verify", "fields", "write", "plan")
    + _audit_edges + chain("reply", END),
    "conditional_edges": [
        {"from": "plan", "condition": "copy_left",
         "routes": {"copy": "read", "default": "copied"}},
        {"from": "read", "condition": "page_of_turns",
         "routes": {"turns": "verify", "default": "write"}},
        {"from": "copied", "condition": "copy_done",
         "routes": {"done": "audit_validate", "default": "reply"}},
        *_audit_routes,
    ],
}
