"""The optional embedding provider configured in the run's settings.

Kept free of heavy imports: the provider's client (httpx) is only imported on first
use, never during the MCP handshake. ``EmbeddingConfig`` itself lives in ``constants``,
where the settings check it at start-up.
"""

from __future__ import annotations

from constants import EmbeddingConfig

__all__ = ["EmbeddingConfig", "embedding_config"]


def embedding_config(settings: object) -> EmbeddingConfig | None:
    """The provider configured in ``settings`` (``Settings.embeddings``), if any."""
    config = getattr(settings, "embeddings", None)
    return config if isinstance(config, EmbeddingConfig) else None
