"""migrate: copy the next page of a whole store into another (`stenographer migrate`).

The run's context holds both stores: ``source`` is read, ``store`` (the target) written.
validate → plan (the target's progress row: a new copy into an empty target, or where an
interrupted one stopped; anything else is refused) → read the next page of the table
being copied from the source → for turns: verify their content and chain hashes, then
rebuild their keyword index fields → write the page and move the progress row (one
transaction of the target) → reply. The command runs it until the reply says done, then
runs ``contract_audit`` on the target.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["DEFINITION"]

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "migrate",
    "channels": channels("request", "migration", "progress", "claimed", "page", "rows",
                         "evidence", "verified", "fields", "written", "reply"),
    "nodes": {
        "validate": {"type": "checked_migration"},
        "plan": {"type": "migration_plan"},
        "read": {"type": "migration_page"},
        "verify": {"type": "verified_turns"},
        "fields": {"type": "migration_fields"},
        "write": {"type": "copied_page"},
        "reply": {"type": "migration_reply"},
    },
    "edges": chain(START, "validate", "plan") + chain("verify", "fields", "write", "reply", END),
    "conditional_edges": [
        {"from": "plan", "condition": "copy_left",
         "routes": {"copy": "read", "default": "reply"}},
        {"from": "read", "condition": "page_of_turns",
         "routes": {"turns": "verify", "default": "write"}},
    ],
}
