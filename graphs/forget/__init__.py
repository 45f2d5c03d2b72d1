"""forget: delete turns by ids, session, time range and/or literal text, for good.

validate (confirm=true required) → resolve the session → forget in one transaction (the
GraphRAG graph re-derived without the turns; tombstones; turns out of the store and both
indexes; affected briefs rebuilt from their remaining sources; neighbours re-indexed;
the file's rewrite marked pending; stage traces hold no text, so none is touched) →
scrub the file (index merge, VACUUM, checkpoint; what another connection holds up is
finished in the background) → reply.
"""

from graphs.definition import channels, linear

DEFINITION = linear(
    "forget",
    channels("request", "forget", "forgotten", "scrubbed", "reply"),
    validate="checked_forget",
    scope="forget_scope",
    forget="forgotten_turns",
    scrub="scrubbed_store",
    reply="forget_reply",
)
