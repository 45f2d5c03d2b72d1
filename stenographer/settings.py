"""Settings: one frozen object built once from the environment, at the edge.

Nothing else in the project reads ``os.environ``. The graphs and nodes receive the
values they need through the run context (``RunContext.settings``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from nodes.evaluate_contracts.peer_url import PEER_URL_FORM, peer_url
from nodes.extract.embedding_config import DEFAULT_URLS, PROVIDERS, EmbeddingConfig
from nodes.extract.secrets import compile_extra
from nodes.extract.transcripts import KINDS as CAPTURE_KINDS
from store.backend import is_postgres_url
from store.bus import BUS_FILE

__all__ = [
    "DEFAULT_BRIEFING_CHARS",
    "DEFAULT_BUS_TIMEOUT_MS",
    "DEFAULT_CAPTURE_INTERVAL",
    "DEFAULT_CLAUDE_PROJECTS",
    "DEFAULT_CODEX_SESSIONS",
    "DEFAULT_DATA_DIR",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_CONTENT_CHARS",
    "DEFAULT_SHARED_DIR",
    "DEFAULT_SYNC_BATCH",
    "DEFAULT_SYNC_INTERVAL",
    "DEFAULT_SYNC_RETRIES",
    "DEFAULT_SYNC_TIMEOUT",
    "DEFAULT_TOP_K",
    "DEFAULT_TRACE_RETENTION",
    "DEFAULT_TURN_LIMIT",
    "DEFAULT_VECTOR_DIM",
    "MIN_TOKEN_CHARS",
    "TOKEN_RE",
    "Settings",
    "SettingsError",
]

DEFAULT_DATA_DIR = Path("~/.omega-stenographer")
DEFAULT_TURN_LIMIT = 8
DEFAULT_TOP_K = 5
DEFAULT_MAX_CHARS = 8_000  # reply budget of the read tools
# What a host hook adds to the context when a session starts: ~1,500 tokens, a small
# share of a context window that was just compacted to make room.
DEFAULT_BRIEFING_CHARS = 6_000
DEFAULT_MAX_CONTENT_CHARS = 1_000_000  # one turn; 1 MB single-line turns are accepted
DEFAULT_TRACE_RETENTION = 2_000  # stage traces kept in the store
DEFAULT_VECTOR_DIM = 128  # int8 components of the hashed vectors (migration 3)
DEFAULT_SYNCHRONOUS = "normal"  # WAL + NORMAL survives process crashes; FULL survives power loss
# The coordination bus of the Omega/VERITAS tools: <dir>/coordination.sqlite (store.bus).
DEFAULT_SHARED_DIR = Path("~/.veritas-shared")
DEFAULT_BUS_TIMEOUT_MS = 25  # busy timeout on the bus: a locked bus costs an ingest this once
# Publishing turns to the bus as STENO_EXCHANGE events (store.bus_outbox, stenographer.bus).
DEFAULT_BUS_BATCH = 200  # events per bus transaction
DEFAULT_BUS_INTERVAL = 2.0  # seconds between background publish rounds
DEFAULT_BUS_PUBLISH_TIMEOUT_MS = 2_000  # busy timeout of a publish (off the ingest path)
DEFAULT_BUS_EXCERPT_CHARS = 4_000  # content characters in an event's payload
DEFAULT_GRAPHRAG_SEED = 42  # seed of the GraphRAG community detection (Louvain)
DEFAULT_GRAPHRAG_BATCH = 5_000  # turns per GraphRAG extraction batch (larger: fewer edge upserts)
DEFAULT_GRAPHRAG_RESOLUTION = 1.0  # Louvain resolution: above 1, smaller communities
# The next extraction batch is extracted in a worker process while this one is written
# when it has at least this many turns (smaller ones do not repay starting the worker);
# 0: everything in one process, the default on a machine with one core.
DEFAULT_GRAPHRAG_PREFETCH = 1_000 if (len(os.sched_getaffinity(0))  # Linux: usable cores
                                     if hasattr(os, "sched_getaffinity")
                                     else os.cpu_count() or 1) > 1 else 0
# Automatic capture: where the hosts write their transcripts (CLAUDE_CONFIG_DIR and
# CODEX_HOME move them, as they do for the hosts), and how often a watcher looks.
DEFAULT_CLAUDE_PROJECTS = Path("~/.claude/projects")
DEFAULT_CODEX_SESSIONS = Path("~/.codex/sessions")
DEFAULT_CAPTURE_INTERVAL = 1.0  # seconds between a watcher's looks at the files
# Sync (export/import, push/pull): turns per batch, background push period, HTTP timeout,
# attempts after the first on a transient failure (backoff doubles from 0.5 s up to 30 s).
DEFAULT_SYNC_BATCH = 500
DEFAULT_SYNC_INTERVAL = 30.0
DEFAULT_SYNC_TIMEOUT = 60.0
DEFAULT_SYNC_RETRIES = 5


_N = TypeVar("_N", int, float)


class SettingsError(ValueError):
    """An environment variable holds a value that is not valid."""


def _ranged(env: Mapping[str, str], name: str, default: _N, low: _N, high: _N,
            parse: Callable[[str], _N], what: str) -> _N:
    """An optional number from the environment, checked against its range."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not {what} ({low}..{high})") from None
    if not low <= value <= high:
        raise SettingsError(f"{name}={value} is out of range ({low}..{high})")
    return value


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    return _ranged(env, name, default, low, high, int, "a whole number")


@dataclass(frozen=True)
class Settings:
    data_dir: Path = field(default_factory=lambda: DEFAULT_DATA_DIR.expanduser())
    turn_limit: int = DEFAULT_TURN_LIMIT
    top_k: int = DEFAULT_TOP_K
    max_chars: int = DEFAULT_MAX_CHARS
    briefing_chars: int = DEFAULT_BRIEFING_CHARS
    max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS
    trace_retention: int = DEFAULT_TRACE_RETENTION
    vector_dim: int = DEFAULT_VECTOR_DIM
    synchronous: str = DEFAULT_SYNCHRONOUS
    # A shared PostgreSQL database (STENO_DATABASE_URL); None: the SQLite file in data_dir.
    # It may hold a password: never in repr() or logs.
    database_url: str | None = field(default=None, repr=False)
    decision_patterns: tuple[str, ...] = ()
    blocker_patterns: tuple[str, ...] = ()
    # Secret redaction at ingest (nodes.extract.secrets): on by default; extra regexes.
    redact_secrets: bool = True
    secret_patterns: tuple[str, ...] = ()
    # HTTP transport (stenographer.http). The token never appears in repr() or logs.
    http_token: str | None = field(default=None, repr=False)
    http_token_file: Path | None = None  # where the token was read from, if a file
    allowed_hosts: tuple[str, ...] = ()  # extra Host values, e.g. steno.lan:8765
    allowed_origins: tuple[str, ...] = ()  # extra Origin values, e.g. http://steno.lan:8765
    # Optional embedding provider (STENO_EMBEDDINGS); None: hashed vectors only.
    embeddings: EmbeddingConfig | None = None
    # Coordination bus directory and its busy timeout. None: no bus. ``from_env`` applies
    # the documented default (DEFAULT_SHARED_DIR); settings built in code name the
    # directory they want, so embedding code and tests never touch ~/.veritas-shared.
    shared_dir: Path | None = None
    bus_timeout_ms: int = DEFAULT_BUS_TIMEOUT_MS
    bus_publish: bool = True  # publish new turns when a bus is configured (STENO_BUS_PUBLISH)
    bus_batch: int = DEFAULT_BUS_BATCH
    bus_interval: float = DEFAULT_BUS_INTERVAL
    bus_publish_timeout_ms: int = DEFAULT_BUS_PUBLISH_TIMEOUT_MS
    bus_excerpt_chars: int = DEFAULT_BUS_EXCERPT_CHARS
    # GraphRAG batch extraction (`stenographer graphrag`).
    graphrag_seed: int = DEFAULT_GRAPHRAG_SEED
    graphrag_batch: int = DEFAULT_GRAPHRAG_BATCH
    graphrag_resolution: float = DEFAULT_GRAPHRAG_RESOLUTION
    graphrag_prefetch: int = DEFAULT_GRAPHRAG_PREFETCH
    # Automatic capture of host transcripts (stenographer capture / hook).
    capture_claude_dir: Path = field(
        default_factory=lambda: DEFAULT_CLAUDE_PROJECTS.expanduser())
    capture_codex_dir: Path = field(default_factory=lambda: DEFAULT_CODEX_SESSIONS.expanduser())
    capture_sources: tuple[str, ...] = CAPTURE_KINDS
    capture_interval: float = DEFAULT_CAPTURE_INTERVAL
    # Sync between stores (stenographer sync, background push when a peer is set).
    sync_peer: str | None = None
    sync_token: str | None = field(default=None, repr=False)
    sync_batch: int = DEFAULT_SYNC_BATCH
    sync_interval: float = DEFAULT_SYNC_INTERVAL
    sync_timeout: float = DEFAULT_SYNC_TIMEOUT
    sync_retries: int = DEFAULT_SYNC_RETRIES

    @property
    def db_path(self) -> Path:
        return self.data_dir / "steno.db"

    @property
    def bus_path(self) -> Path | None:
        return None if self.shared_dir is None else self.shared_dir / BUS_FILE

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = env.get("OMEGA_STENOGRAPHER_DIR") or str(DEFAULT_DATA_DIR)
        sync = env.get("STENO_SYNCHRONOUS", DEFAULT_SYNCHRONOUS).strip().lower()
        if sync not in ("normal", "full"):
            raise SettingsError(f"STENO_SYNCHRONOUS={sync!r} is not valid (normal, full)")
        return cls(
            data_dir=Path(data_dir).expanduser().resolve(),
            turn_limit=_int(env, "STENO_TURN_LIMIT", DEFAULT_TURN_LIMIT, 2, 1_000),
            top_k=_int(env, "STENO_TOP_K", DEFAULT_TOP_K, 1, 50),
            max_chars=_int(env, "STENO_MAX_CHARS", DEFAULT_MAX_CHARS, 500, 200_000),
            briefing_chars=_int(env, "STENO_BRIEFING_CHARS", DEFAULT_BRIEFING_CHARS,
                                1_000, 10_000),
            max_content_chars=_int(
                env, "STENO_MAX_CONTENT_CHARS", DEFAULT_MAX_CONTENT_CHARS, 100, 10_000_000
            ),
            trace_retention=_int(
                env, "STENO_TRACE_RETENTION", DEFAULT_TRACE_RETENTION, 10, 1_000_000
            ),
            synchronous=sync,
            database_url=_database_url(env),
            decision_patterns=_patterns(env.get("STENO_DECISION_PATTERNS")),
            blocker_patterns=_patterns(env.get("STENO_BLOCKER_PATTERNS")),
            redact_secrets=_switch(env, "STENO_REDACT_SECRETS", True),
            secret_patterns=_secret_patterns(env.get("STENO_SECRET_PATTERNS")),
            http_token=_http_token(env),
            http_token_file=_token_file(env),
            allowed_hosts=_allowlist(env, "STENO_ALLOWED_HOSTS", _HOST_RE,
                                     "host[:port] or host:*, e.g. steno.lan:8765"),
            allowed_origins=_allowlist(env, "STENO_ALLOWED_ORIGINS", _ORIGIN_RE,
                                       "http(s)://host[:port], e.g. http://steno.lan:8765"),
            embeddings=_embeddings(env),
            shared_dir=_shared_dir(env),
            bus_timeout_ms=_int(env, "STENO_BUS_TIMEOUT_MS", DEFAULT_BUS_TIMEOUT_MS, 0, 2_000),
            bus_publish=_switch(env, "STENO_BUS_PUBLISH", True),
            bus_batch=_int(env, "STENO_BUS_BATCH", DEFAULT_BUS_BATCH, 1, 10_000),
            bus_interval=_float(env, "STENO_BUS_INTERVAL", DEFAULT_BUS_INTERVAL, 0.05, 86_400.0),
            bus_publish_timeout_ms=_int(env, "STENO_BUS_PUBLISH_TIMEOUT_MS",
                                        DEFAULT_BUS_PUBLISH_TIMEOUT_MS, 0, 60_000),
            bus_excerpt_chars=_int(env, "STENO_BUS_EXCERPT_CHARS", DEFAULT_BUS_EXCERPT_CHARS,
                                   0, 10_000_000),
            graphrag_seed=_int(env, "STENO_GRAPHRAG_SEED", DEFAULT_GRAPHRAG_SEED, 0, 2**32 - 1),
            graphrag_batch=_int(env, "STENO_GRAPHRAG_BATCH", DEFAULT_GRAPHRAG_BATCH, 1, 100_000),
            graphrag_resolution=_float(env, "STENO_GRAPHRAG_RESOLUTION",
                                       DEFAULT_GRAPHRAG_RESOLUTION, 0.01, 100.0),
            graphrag_prefetch=_int(env, "STENO_GRAPHRAG_PREFETCH", DEFAULT_GRAPHRAG_PREFETCH,
                                   0, 100_000),
            capture_claude_dir=_capture_dir(env, "STENO_CAPTURE_CLAUDE_DIR", "CLAUDE_CONFIG_DIR",
                                            "projects", DEFAULT_CLAUDE_PROJECTS),
            capture_codex_dir=_capture_dir(env, "STENO_CAPTURE_CODEX_DIR", "CODEX_HOME",
                                           "sessions", DEFAULT_CODEX_SESSIONS),
            capture_sources=_capture_sources(env),
            capture_interval=_float(env, "STENO_CAPTURE_INTERVAL", DEFAULT_CAPTURE_INTERVAL,
                                    0.05, 3_600.0),
            sync_peer=_sync_peer(env),
            sync_token=_sync_token(env),
            sync_batch=_int(env, "STENO_SYNC_BATCH", DEFAULT_SYNC_BATCH, 1, 10_000),
            sync_interval=_float(env, "STENO_SYNC_INTERVAL", DEFAULT_SYNC_INTERVAL,
                                 0.1, 86_400.0),
            sync_timeout=_float(env, "STENO_SYNC_TIMEOUT", DEFAULT_SYNC_TIMEOUT, 1.0, 3_600.0),
            sync_retries=_int(env, "STENO_SYNC_RETRIES", DEFAULT_SYNC_RETRIES, 0, 100),
        )


def _database_url(env: Mapping[str, str]) -> str | None:
    """STENO_DATABASE_URL (or the file STENO_DATABASE_URL_FILE names): postgresql://..."""
    raw, name = _value_or_file(env, "STENO_DATABASE_URL", "STENO_DATABASE_URL_FILE")
    if not raw:
        return None
    if not is_postgres_url(raw):
        raise SettingsError(
            f"{name} must be a postgresql://user:password@host:port/database URL "
            "(unset: the SQLite file in OMEGA_STENOGRAPHER_DIR)"
        )
    return raw


def _shared_dir(env: Mapping[str, str]) -> Path | None:
    """VERITAS_SHARED_DIR: the directory of the tools' shared coordination.sqlite, or off."""
    raw = env.get("VERITAS_SHARED_DIR", "").strip()
    if raw.lower() in _OFF:
        return None
    return Path(raw or str(DEFAULT_SHARED_DIR)).expanduser().resolve()


def _patterns(raw: str | None) -> tuple[str, ...]:
    """Extra extraction regexes, one per line (a regex may itself contain `|`)."""
    if not raw:
        return ()
    return tuple(line.strip() for line in raw.splitlines() if line.strip())


_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in _ON + _OFF:
        raise SettingsError(f"{name}={raw!r} is not valid (on or off)")
    return raw in _ON


def _secret_patterns(raw: str | None) -> tuple[str, ...]:
    """STENO_SECRET_PATTERNS: extra secret regexes, one per line, checked at start."""
    sources = _patterns(raw)
    try:
        compile_extra(sources)
    except ValueError as ex:
        raise SettingsError(f"STENO_SECRET_PATTERNS: {ex}") from None
    return sources


# --- HTTP transport -------------------------------------------------------------------------

MIN_TOKEN_CHARS = 16
TOKEN_RE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: it travels in an HTTP header
_HOSTNAME = r"(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)"
_HOST_RE = re.compile(rf"{_HOSTNAME}(?::(?:[0-9]{{1,5}}|\*))?")
_ORIGIN_RE = re.compile(rf"https?://{_HOSTNAME}(?::(?:[0-9]{{1,5}}|\*))?")


def _secret_file(name: str, path: Path) -> str:
    """A secret kept in a file (surrounding whitespace dropped); never quoted in errors."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as ex:
        reason = ex.strerror if isinstance(ex, OSError) else "not UTF-8 text"
        raise SettingsError(f"{name}={str(path)!r} cannot be read: {reason}") from None
    if not value:
        raise SettingsError(f"{name}={str(path)!r} is empty")
    return value


def _file_setting(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name, "").strip()
    return Path(raw).expanduser().resolve() if raw else None


def _token_file(env: Mapping[str, str]) -> Path | None:
    return _file_setting(env, "STENO_HTTP_TOKEN_FILE")


def _value_or_file(env: Mapping[str, str], name: str, file_name: str) -> tuple[str, str]:
    """``name``'s value, or the secret in the file ``file_name`` names (one of them), and
    how to refer to it in an error (never by its value)."""
    value = env.get(name, "").strip()
    path = _file_setting(env, file_name)
    if value and path is not None:
        raise SettingsError(f"set {name} or {file_name}, not both")
    if path is not None:
        return _secret_file(file_name, path), f"the token in {file_name} ({path})"
    return value, name


def _http_token(env: Mapping[str, str]) -> str | None:
    """The bearer token from STENO_HTTP_TOKEN or the file STENO_HTTP_TOKEN_FILE names
    (one of them; surrounding whitespace, e.g. a final newline, is dropped). The value
    is never quoted in an error."""
    value, name = _value_or_file(env, "STENO_HTTP_TOKEN", "STENO_HTTP_TOKEN_FILE")
    if not value:
        return None
    if len(value) < MIN_TOKEN_CHARS or not TOKEN_RE.fullmatch(value):
        raise SettingsError(
            f"{name} is not valid: use at least {MIN_TOKEN_CHARS} visible ASCII characters "
            "without spaces (e.g. the output of `openssl rand -hex 32`)")
    return value


def _allowlist(env: Mapping[str, str], name: str, pattern: re.Pattern[str],
               valid: str) -> tuple[str, ...]:
    """A comma-separated list; every entry must match ``pattern`` (compared lowercase)."""
    entries = [e.strip().lower() for e in env.get(name, "").split(",") if e.strip()]
    for entry in entries:
        if not pattern.fullmatch(entry):
            raise SettingsError(f"{name} entry {entry!r} is not valid (expected {valid})")
    return tuple(dict.fromkeys(entries))


# --- optional embedding provider ------------------------------------------------------------

DEFAULT_EMBEDDINGS_TIMEOUT_S = 10.0
DEFAULT_EMBEDDINGS_BATCH = 32
_URL_RE = re.compile(r"https?://[^\s/?#]+(?:/[^\s]*)?", re.IGNORECASE)
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _float(env: Mapping[str, str], name: str, default: float, low: float, high: float
           ) -> float:
    return _ranged(env, name, default, low, high, float, "a number")


def _embeddings_key(env: Mapping[str, str]) -> str | None:
    """The provider's API key: from the file STENO_EMBEDDINGS_API_KEY_FILE names, or from
    the environment variable STENO_EMBEDDINGS_API_KEY_ENV names (e.g. OPENAI_API_KEY);
    never quoted in an error."""
    path = env.get("STENO_EMBEDDINGS_API_KEY_FILE", "").strip()
    var = env.get("STENO_EMBEDDINGS_API_KEY_ENV", "").strip()
    if path and var:
        raise SettingsError("set STENO_EMBEDDINGS_API_KEY_FILE or STENO_EMBEDDINGS_API_KEY_ENV, "
                            "not both")
    if path:
        return _secret_file("STENO_EMBEDDINGS_API_KEY_FILE", Path(path).expanduser())
    if var:
        if not _ENV_NAME_RE.fullmatch(var):
            raise SettingsError(f"STENO_EMBEDDINGS_API_KEY_ENV={var!r} is not a variable name")
        key = env.get(var, "").strip()
        if not key:
            raise SettingsError(f"STENO_EMBEDDINGS_API_KEY_ENV names {var}, which is not set")
        return key
    return None


def _embeddings(env: Mapping[str, str]) -> EmbeddingConfig | None:
    """STENO_EMBEDDINGS=openai|ollama turns the provider on (default: off)."""
    provider = env.get("STENO_EMBEDDINGS", "").strip().lower()
    if provider in ("", "off", "none", "0", "false"):
        return None
    if provider not in PROVIDERS:
        raise SettingsError(f"STENO_EMBEDDINGS={provider!r} is not valid "
                            f"(off, {', '.join(PROVIDERS)})")
    url = env.get("STENO_EMBEDDINGS_URL", "").strip() or DEFAULT_URLS[provider]
    if not _URL_RE.fullmatch(url):
        raise SettingsError(f"STENO_EMBEDDINGS_URL={url!r} is not an http(s) URL, e.g. "
                            f"{DEFAULT_URLS[provider]}")
    model = env.get("STENO_EMBEDDINGS_MODEL", "").strip()
    if not model:
        raise SettingsError("STENO_EMBEDDINGS_MODEL is required with STENO_EMBEDDINGS, e.g. "
                            "nomic-embed-text (ollama) or text-embedding-3-small (openai)")
    dim = _int(env, "STENO_EMBEDDINGS_DIM", 0, 0, 65_536)
    return EmbeddingConfig(
        provider=provider,  # checked against PROVIDERS above
        url=url,
        model=model,
        dim=dim or None,
        api_key=_embeddings_key(env),
        timeout_s=_float(env, "STENO_EMBEDDINGS_TIMEOUT", DEFAULT_EMBEDDINGS_TIMEOUT_S,
                         0.05, 600.0),
        batch=_int(env, "STENO_EMBEDDINGS_BATCH", DEFAULT_EMBEDDINGS_BATCH, 1, 2_048),
        retries=_int(env, "STENO_EMBEDDINGS_RETRIES", 2, 0, 10),
        weight=_float(env, "STENO_EMBEDDINGS_WEIGHT", 1.0, 0.0, 100.0),
    )


# --- automatic capture ----------------------------------------------------------------------


def _capture_dir(env: Mapping[str, str], name: str, host_var: str, sub: str,
                 default: Path) -> Path:
    """A transcript root: STENO_CAPTURE_*_DIR, else the host's own home variable
    (CLAUDE_CONFIG_DIR, CODEX_HOME) plus its sub-directory, else the host's default."""
    raw = env.get(name, "").strip()
    if raw:
        return Path(raw).expanduser().absolute()
    home = env.get(host_var, "").strip()
    return (Path(home).expanduser() / sub if home else default.expanduser()).absolute()


def _capture_sources(env: Mapping[str, str]) -> tuple[str, ...]:
    """STENO_CAPTURE_SOURCES: which hosts' transcripts capture follows (comma-separated)."""
    raw = env.get("STENO_CAPTURE_SOURCES", "").strip()
    if not raw:
        return CAPTURE_KINDS
    kinds = [k.strip().lower() for k in raw.split(",") if k.strip()]
    for kind in kinds:
        if kind not in CAPTURE_KINDS:
            raise SettingsError(f"STENO_CAPTURE_SOURCES entry {kind!r} is not valid "
                                f"({', '.join(CAPTURE_KINDS)})")
    return tuple(dict.fromkeys(kinds))


# --- sync between stores --------------------------------------------------------------------


def _sync_peer(env: Mapping[str, str]) -> str | None:
    """STENO_SYNC_PEER: the instance that a server pushes to in the background."""
    raw = env.get("STENO_SYNC_PEER", "").strip()
    if not raw:
        return None
    url = peer_url(raw)
    if url is None:
        raise SettingsError(f"STENO_SYNC_PEER={raw!r} is not a peer URL ({PEER_URL_FORM})")
    return url


def _sync_token(env: Mapping[str, str]) -> str | None:
    """The bearer token sent to peers: STENO_SYNC_TOKEN or the file STENO_SYNC_TOKEN_FILE
    names (the peer's STENO_HTTP_TOKEN). Never quoted in an error."""
    value, _ = _value_or_file(env, "STENO_SYNC_TOKEN", "STENO_SYNC_TOKEN_FILE")
    if value and not TOKEN_RE.fullmatch(value):
        raise SettingsError("the sync token is not valid: visible ASCII without spaces")
    return value or None
