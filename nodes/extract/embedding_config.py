"""The optional embedding provider's configuration (built by ``stenographer.settings``).

Kept free of heavy imports: settings are read at start-up, and the provider's client
(httpx) is only imported on first use, never during the MCP handshake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_URLS",
    "PROVIDERS",
    "EmbeddingConfig",
    "embedding_config",
]

Provider = Literal["openai", "ollama"]
PROVIDERS: tuple[Provider, ...] = ("openai", "ollama")
DEFAULT_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1/embeddings",  # any OpenAI-compatible /v1/embeddings
    "ollama": "http://127.0.0.1:11434/api/embed",
}


@dataclass(frozen=True)
class EmbeddingConfig:
    """An OpenAI-compatible (``POST /v1/embeddings``) or Ollama (``POST /api/embed``)
    endpoint. ``dim`` None: the dimension of the first answer, enforced after that."""

    provider: Provider
    url: str
    model: str
    dim: int | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0
    batch: int = 32
    retries: int = 2
    weight: float = 1.0  # of the provider's list in the fused ranking (keyword list: 1.0)

    @property
    def key(self) -> str:
        """Names this model's vectors in the store: a different model, other vectors."""
        return f"{self.provider}:{self.model}" + (f":{self.dim}" if self.dim else "")


def embedding_config(settings: object) -> EmbeddingConfig | None:
    """The provider configured in ``settings`` (``Settings.embeddings``), if any."""
    config = getattr(settings, "embeddings", None)
    return config if isinstance(config, EmbeddingConfig) else None
