"""The project's one exception root.

    StenoError                  every error this project raises on purpose
    ├── InvalidInput            bad input from a caller: says what was wrong and what is valid
    ├── NotFound                a session, exchange or run that does not exist
    ├── StoreError              the database could not do what was asked (locked, corrupt)
    └── EmbeddingError          the optional embedding provider failed (nodes.extract.
                                embeddings); never fails an ingest, only delays vectors

User-facing errors (``InvalidInput``, ``NotFound``) reach MCP clients as the text of an
``isError`` result and CLI users as a message with exit code 2. Errors carry context:
``graph`` and ``node`` are filled in by the graph runner, ``exchange_id`` where known.
``code`` is a lowercase dotted name; ``retryable`` is read by the graph engine.
"""

from __future__ import annotations

__all__ = ["InvalidInput", "NotFound", "StenoError", "StoreError"]


class StenoError(Exception):
    code = "steno.error"
    retryable = False
    user_facing = False

    def __init__(self, message: str, *, exchange_id: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exchange_id = exchange_id
        self.graph: str | None = None
        self.node: str | None = None


class InvalidInput(StenoError):
    code = "steno.invalid_input"
    user_facing = True


class NotFound(StenoError):
    code = "steno.not_found"
    user_facing = True


class StoreError(StenoError):
    code = "steno.store"
