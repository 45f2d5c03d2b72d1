"""Settings: one frozen, validated object built once from the environment, at the edge.

Nothing else in the project reads ``os.environ``. The graphs and nodes receive the
values they need through the run context (``RunContext.settings``).

``Settings(...)`` built in code holds the defaults and what the code names; only
``Settings.from_env()`` reads the environment (``_Environment``: a variable's value,
stripped, empty meaning unset; a secret read from the file its ``*_FILE`` variable names;
the defaults that follow other variables). Every value is then checked by the model's
types and constraints, and a bad one is a ``SettingsError`` that names the variable and
what is valid. Loading this module loads no node, store or graph code.
"""

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from annotated_types import Ge, Le
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from constants import (
    CAPTURE_KINDS,
    DEFAULT_EMBEDDING_URLS,
    EMBEDDING_PROVIDERS,
    PEER_URL_FORM,
    EmbeddingConfig,
    compile_extra,
    is_postgres_url,
    peer_url,
)

__all__ = [
    "BUS_FILE",
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
    "reveal",
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
BUS_FILE = "coordination.sqlite"
DEFAULT_BUS_TIMEOUT_MS = 25  # busy timeout on the bus: a locked bus costs an ingest this once
# Publishing turns to the bus as STENO_EXCHANGE events (the bus_publish graph).
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
USABLE_CORES = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")  # Linux
                else os.cpu_count() or 1)
DEFAULT_GRAPHRAG_PREFETCH = 1_000 if USABLE_CORES > 1 else 0
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

# The HTTP bearer token travels in a header: visible ASCII, and long enough to guess badly.
MIN_TOKEN_CHARS = 16
TOKEN_RE = re.compile(r"[\x21-\x7e]+")
_HOSTNAME = r"(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)"
_HOST_RE = re.compile(rf"{_HOSTNAME}(?::(?:[0-9]{{1,5}}|\*))?")
_ORIGIN_RE = re.compile(rf"https?://{_HOSTNAME}(?::(?:[0-9]{{1,5}}|\*))?")
_OFF = ("0", "off", "false", "no", "none")


class SettingsError(ValueError):
    """An environment variable holds a value that is not valid."""


def reveal(secret: SecretStr | None) -> str | None:
    """A secret setting's value, for the one call that uses it (never for a log)."""
    return None if secret is None else secret.get_secret_value()


def _invalid(reason: str = "") -> PydanticCustomError:
    """A value a validator refuses; ``_message`` words it for the variable that set it."""
    return PydanticCustomError("setting", "not valid: {reason}", {"reason": reason})


def _lines(value: Any) -> Any:
    """Regexes from the environment: one per line (a regex may itself contain `|`)."""
    if isinstance(value, str):
        return tuple(line.strip() for line in value.splitlines() if line.strip())
    return value


def _entries(value: Any) -> Any:
    """A comma-separated list from the environment, lowercase, each entry once."""
    if isinstance(value, str):
        value = [e.strip() for e in value.split(",") if e.strip()]
    if isinstance(value, list | tuple):
        return tuple(dict.fromkeys(str(e).lower() for e in value))
    return value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _matching(pattern: re.Pattern[str]) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise _invalid()
        return value
    return AfterValidator(check)


def _checked_patterns(sources: tuple[str, ...]) -> tuple[str, ...]:
    try:
        compile_extra(sources)
    except ValueError as ex:
        raise _invalid(str(ex)) from None
    return sources


def _postgres(url: SecretStr | None) -> SecretStr | None:
    if url is not None and not is_postgres_url(url.get_secret_value()):
        raise _invalid()
    return url


def _http_token(token: SecretStr | None) -> SecretStr | None:
    if token is not None:
        value = token.get_secret_value()
        if len(value) < MIN_TOKEN_CHARS or not TOKEN_RE.fullmatch(value):
            raise _invalid()
    return token


def _sync_token(token: SecretStr | None) -> SecretStr | None:
    if token is not None and not TOKEN_RE.fullmatch(token.get_secret_value()):
        raise _invalid()
    return token


def _peer(value: Any) -> Any:
    if isinstance(value, str):
        url = peer_url(value)
        if url is None:
            raise _invalid()
        return url
    return value


Hosts = tuple[Annotated[str, _matching(_HOST_RE)], ...]
Origins = tuple[Annotated[str, _matching(_ORIGIN_RE)], ...]
Patterns = Annotated[tuple[str, ...], BeforeValidator(_lines)]
CaptureKind = Literal["claude-code", "codex"]


def _env(name: str, low: float | None = None, high: float | None = None, **kw: Any) -> Any:
    """A field read from the environment variable ``name``; ``low``..``high``: its range."""
    return Field(validation_alias=name, ge=low, le=high, **kw)


class Settings(BaseModel):
    """Every setting, its environment variable and its range (docs/settings.md).

    A plain pydantic model: ``from_env`` is its one reader of the environment (each
    field's ``validation_alias`` names its variable), so nothing of pydantic-settings'
    sources (environment, dotenv, secrets directory) is used or imported."""

    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True,
                              extra="forbid", validate_default=False)

    data_dir: Path = _env("OMEGA_STENOGRAPHER_DIR",
                          default_factory=lambda: DEFAULT_DATA_DIR.expanduser())
    turn_limit: int = _env("STENO_TURN_LIMIT", 2, 1_000, default=DEFAULT_TURN_LIMIT)
    top_k: int = _env("STENO_TOP_K", 1, 50, default=DEFAULT_TOP_K)
    max_chars: int = _env("STENO_MAX_CHARS", 500, 200_000, default=DEFAULT_MAX_CHARS)
    briefing_chars: int = _env("STENO_BRIEFING_CHARS", 1_000, 10_000,
                               default=DEFAULT_BRIEFING_CHARS)
    max_content_chars: int = _env("STENO_MAX_CONTENT_CHARS", 100, 10_000_000,
                                  default=DEFAULT_MAX_CONTENT_CHARS)
    trace_retention: int = _env("STENO_TRACE_RETENTION", 10, 1_000_000,
                                default=DEFAULT_TRACE_RETENTION)
    vector_dim: int = DEFAULT_VECTOR_DIM
    synchronous: Annotated[Literal["normal", "full"], BeforeValidator(_lower)] = _env(
        "STENO_SYNCHRONOUS", default=DEFAULT_SYNCHRONOUS)
    # A shared PostgreSQL database; None: the SQLite file in data_dir. Its URL may hold
    # a password, so it is a secret: never in repr() or logs.
    database_url: Annotated[SecretStr | None, AfterValidator(_postgres)] = _env(
        "STENO_DATABASE_URL", default=None)
    decision_patterns: Patterns = _env("STENO_DECISION_PATTERNS", default=())
    blocker_patterns: Patterns = _env("STENO_BLOCKER_PATTERNS", default=())
    # Secret redaction at ingest: on by default; extra regexes, checked at start.
    redact_secrets: bool = _env("STENO_REDACT_SECRETS", default=True)
    secret_patterns: Annotated[Patterns, AfterValidator(_checked_patterns)] = _env(
        "STENO_SECRET_PATTERNS", default=())
    # HTTP transport (stenographer.http): the bearer token, the file it was read from,
    # extra Host values (steno.lan:8765) and Origin values (http://steno.lan:8765).
    http_token: Annotated[SecretStr | None, AfterValidator(_http_token)] = _env(
        "STENO_HTTP_TOKEN", default=None)
    http_token_file: Path | None = None
    allowed_hosts: Annotated[Hosts, BeforeValidator(_entries)] = _env(
        "STENO_ALLOWED_HOSTS", default=())
    allowed_origins: Annotated[Origins, BeforeValidator(_entries)] = _env(
        "STENO_ALLOWED_ORIGINS", default=())
    # Optional embedding provider (STENO_EMBEDDINGS); None: hashed vectors only.
    embeddings: EmbeddingConfig | None = None
    # Coordination bus directory and its busy timeout. None: no bus. ``from_env`` applies
    # the documented default (DEFAULT_SHARED_DIR); settings built in code name the
    # directory they want, so embedding code and tests never touch ~/.veritas-shared.
    shared_dir: Path | None = _env("VERITAS_SHARED_DIR", default=None)
    bus_timeout_ms: int = _env("STENO_BUS_TIMEOUT_MS", 0, 2_000, default=DEFAULT_BUS_TIMEOUT_MS)
    bus_publish: bool = _env("STENO_BUS_PUBLISH", default=True)  # when a bus is configured
    bus_batch: int = _env("STENO_BUS_BATCH", 1, 10_000, default=DEFAULT_BUS_BATCH)
    bus_interval: float = _env("STENO_BUS_INTERVAL", 0.05, 86_400.0,
                               default=DEFAULT_BUS_INTERVAL)
    bus_publish_timeout_ms: int = _env("STENO_BUS_PUBLISH_TIMEOUT_MS", 0, 60_000,
                                       default=DEFAULT_BUS_PUBLISH_TIMEOUT_MS)
    bus_excerpt_chars: int = _env("STENO_BUS_EXCERPT_CHARS", 0, 10_000_000,
                                  default=DEFAULT_BUS_EXCERPT_CHARS)
    # GraphRAG batch extraction (`stenographer graphrag`).
    graphrag_seed: int = _env("STENO_GRAPHRAG_SEED", 0, 2**32 - 1, default=DEFAULT_GRAPHRAG_SEED)
    graphrag_batch: int = _env("STENO_GRAPHRAG_BATCH", 1, 100_000,
                               default=DEFAULT_GRAPHRAG_BATCH)
    graphrag_resolution: float = _env("STENO_GRAPHRAG_RESOLUTION", 0.01, 100.0,
                                      default=DEFAULT_GRAPHRAG_RESOLUTION)
    graphrag_prefetch: int = _env("STENO_GRAPHRAG_PREFETCH", 0, 100_000,
                                  default=DEFAULT_GRAPHRAG_PREFETCH)
    # Automatic capture of host transcripts (stenographer capture / hook).
    capture_claude_dir: Path = _env("STENO_CAPTURE_CLAUDE_DIR",
                                    default_factory=lambda: DEFAULT_CLAUDE_PROJECTS.expanduser())
    capture_codex_dir: Path = _env("STENO_CAPTURE_CODEX_DIR",
                                   default_factory=lambda: DEFAULT_CODEX_SESSIONS.expanduser())
    capture_sources: Annotated[tuple[CaptureKind, ...], BeforeValidator(_entries)] = _env(
        "STENO_CAPTURE_SOURCES", default=CAPTURE_KINDS)
    capture_interval: float = _env("STENO_CAPTURE_INTERVAL", 0.05, 3_600.0,
                                   default=DEFAULT_CAPTURE_INTERVAL)
    # Sync between stores (stenographer sync, background push when a peer is set); the
    # token is the peer's STENO_HTTP_TOKEN.
    sync_peer: Annotated[str | None, BeforeValidator(_peer)] = _env("STENO_SYNC_PEER",
                                                                     default=None)
    sync_token: Annotated[SecretStr | None, AfterValidator(_sync_token)] = _env(
        "STENO_SYNC_TOKEN", default=None)
    sync_batch: int = _env("STENO_SYNC_BATCH", 1, 10_000, default=DEFAULT_SYNC_BATCH)
    sync_interval: float = _env("STENO_SYNC_INTERVAL", 0.1, 86_400.0,
                                default=DEFAULT_SYNC_INTERVAL)
    sync_timeout: float = _env("STENO_SYNC_TIMEOUT", 1.0, 3_600.0, default=DEFAULT_SYNC_TIMEOUT)
    sync_retries: int = _env("STENO_SYNC_RETRIES", 0, 100, default=DEFAULT_SYNC_RETRIES)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "steno.db"

    @property
    def bus_path(self) -> Path | None:
        return None if self.shared_dir is None else self.shared_dir / BUS_FILE

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, checked like the rest."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**values, **changes})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        source = _Environment(cls, os.environ if env is None else env)
        try:
            return cls(**source())
        except ValidationError as ex:
            raise SettingsError(_message(ex.errors()[0], source.named)) from None


# --- reading the environment ---------------------------------------------------------------

# Where each of the provider's fields comes from (STENO_EMBEDDINGS turns it on; the API
# key: below).
_EMBEDDING_VARS = {
    "provider": "STENO_EMBEDDINGS", "url": "STENO_EMBEDDINGS_URL",
    "model": "STENO_EMBEDDINGS_MODEL", "dim": "STENO_EMBEDDINGS_DIM",
    "timeout_s": "STENO_EMBEDDINGS_TIMEOUT",
    "batch": "STENO_EMBEDDINGS_BATCH", "retries": "STENO_EMBEDDINGS_RETRIES",
    "weight": "STENO_EMBEDDINGS_WEIGHT",
}
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Environment:
    """The settings' values in an environment: each field's variable, stripped (empty is
    unset), and the values that come from more than one variable. ``named`` says how an
    error refers to a value read from a file (never by the value)."""

    def __init__(self, settings_cls: type[Settings], env: Mapping[str, str]) -> None:
        self.settings_cls = settings_cls
        self.env = env
        self.named: dict[str, str] = {}

    def var(self, name: str) -> str:
        return self.env.get(name, "").strip()

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for field in self.settings_cls.model_fields.values():
            if field.validation_alias is not None:  # the field's environment variable
                name = str(field.validation_alias)
                if value := self.var(name):
                    values[name] = value
        data_dir = Path(values.get("OMEGA_STENOGRAPHER_DIR", str(DEFAULT_DATA_DIR)))
        values["OMEGA_STENOGRAPHER_DIR"] = data_dir.expanduser().resolve()
        shared = self.var("VERITAS_SHARED_DIR")
        values["VERITAS_SHARED_DIR"] = (None if shared.lower() in _OFF else
                                        Path(shared or DEFAULT_SHARED_DIR).expanduser().resolve())
        for var, file_var, what in (
                ("STENO_DATABASE_URL", "STENO_DATABASE_URL_FILE", "the URL"),
                ("STENO_HTTP_TOKEN", "STENO_HTTP_TOKEN_FILE", "the token"),
                ("STENO_SYNC_TOKEN", "STENO_SYNC_TOKEN_FILE", "the token")):
            path = self.path(file_var)
            if path is not None:
                if var in values:
                    raise SettingsError(f"set {var} or {file_var}, not both")
                values[var] = self.secret_file(file_var, path)
                self.named[var] = f"{what} in {file_var} ({path})"
        values["http_token_file"] = self.path("STENO_HTTP_TOKEN_FILE")
        values["STENO_CAPTURE_CLAUDE_DIR"] = self.capture_dir(
            "STENO_CAPTURE_CLAUDE_DIR", "CLAUDE_CONFIG_DIR", "projects", DEFAULT_CLAUDE_PROJECTS)
        values["STENO_CAPTURE_CODEX_DIR"] = self.capture_dir(
            "STENO_CAPTURE_CODEX_DIR", "CODEX_HOME", "sessions", DEFAULT_CODEX_SESSIONS)
        provider = self.var("STENO_EMBEDDINGS").lower()
        if provider not in ("", *_OFF):
            values["embeddings"] = self.embeddings(provider)
        return values

    def path(self, name: str) -> Path | None:
        raw = self.var(name)
        return Path(raw).expanduser().resolve() if raw else None

    def capture_dir(self, name: str, host_var: str, sub: str, default: Path) -> Path:
        """A transcript root: STENO_CAPTURE_*_DIR, else the host's own home variable
        (CLAUDE_CONFIG_DIR, CODEX_HOME) plus its sub-directory, else the host's default."""
        if raw := self.var(name):
            return Path(raw).expanduser().absolute()
        home = self.var(host_var)
        return (Path(home).expanduser() / sub if home else default.expanduser()).absolute()

    @staticmethod
    def secret_file(name: str, path: Path) -> str:
        """A secret kept in a file (surrounding whitespace dropped); never quoted."""
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as ex:
            reason = ex.strerror if isinstance(ex, OSError) else "not UTF-8 text"
            raise SettingsError(f"{name}={str(path)!r} cannot be read: {reason}") from None
        if not value:
            raise SettingsError(f"{name}={str(path)!r} is empty")
        return value

    def embeddings(self, provider: str) -> dict[str, Any]:
        config: dict[str, Any] = {field: self.var(var) for field, var in _EMBEDDING_VARS.items()
                                  if self.var(var)}
        config["provider"] = provider
        if provider in DEFAULT_EMBEDDING_URLS:
            config.setdefault("url", DEFAULT_EMBEDDING_URLS[provider])
        key_file, key_var = (self.var("STENO_EMBEDDINGS_API_KEY_FILE"),
                             self.var("STENO_EMBEDDINGS_API_KEY_ENV"))
        if key_file and key_var:
            raise SettingsError("set STENO_EMBEDDINGS_API_KEY_FILE or "
                                "STENO_EMBEDDINGS_API_KEY_ENV, not both")
        if key_file:
            config["api_key"] = self.secret_file("STENO_EMBEDDINGS_API_KEY_FILE",
                                                 Path(key_file).expanduser())
        elif key_var:
            if not _ENV_NAME_RE.fullmatch(key_var):
                raise SettingsError(f"STENO_EMBEDDINGS_API_KEY_ENV={key_var!r} is not a "
                                    "variable name")
            config["api_key"] = self.var(key_var)
            if not config["api_key"]:
                raise SettingsError(f"STENO_EMBEDDINGS_API_KEY_ENV names {key_var}, which is "
                                    "not set")
        return config


# --- the error a bad value is --------------------------------------------------------------

# What is valid, for the values a type alone does not say.
_VALID = {
    "STENO_SYNCHRONOUS": "is not valid (normal, full)",
    "STENO_REDACT_SECRETS": "is not valid (on or off)",
    "STENO_BUS_PUBLISH": "is not valid (on or off)",
    "STENO_DATABASE_URL": "must be a postgresql://user:password@host:port/database URL "
                          "(unset: the SQLite file in OMEGA_STENOGRAPHER_DIR)",
    "STENO_HTTP_TOKEN": f"is not valid: use at least {MIN_TOKEN_CHARS} visible ASCII "
                        "characters without spaces (e.g. the output of `openssl rand -hex 32`)",
    "STENO_SYNC_TOKEN": "is not valid: use visible ASCII without spaces",
    "STENO_ALLOWED_HOSTS": "is not valid (expected host[:port] or host:*, e.g. steno.lan:8765)",
    "STENO_ALLOWED_ORIGINS": "is not valid (expected http(s)://host[:port], "
                             "e.g. http://steno.lan:8765)",
    "STENO_CAPTURE_SOURCES": f"is not valid ({', '.join(CAPTURE_KINDS)})",
    "STENO_SYNC_PEER": f"is not a peer URL ({PEER_URL_FORM})",
    "STENO_EMBEDDINGS": f"is not valid (off, {', '.join(EMBEDDING_PROVIDERS)})",
    "STENO_EMBEDDINGS_URL": "is not an http(s) URL, e.g. "
                            f"{DEFAULT_EMBEDDING_URLS[EMBEDDING_PROVIDERS[0]]}",
    "STENO_EMBEDDINGS_MODEL": "is required with STENO_EMBEDDINGS, e.g. nomic-embed-text "
                              "(ollama) or text-embedding-3-small (openai)",
}
_NUMBERS = {"int_parsing": "a whole number", "int_from_float": "a whole number",
            "float_parsing": "a number"}
_RANGES = ("greater_than_equal", "less_than_equal")


def _field(loc: tuple[int | str, ...]) -> tuple[str, FieldInfo | None]:
    """The variable that sets the value at ``loc``, and its field."""
    first = str(loc[0])
    if first == "embeddings" and len(loc) > 1:
        name = str(loc[1])
        return _EMBEDDING_VARS.get(name, name), EmbeddingConfig.model_fields.get(name)
    for field_name, field in Settings.model_fields.items():
        if first in (field_name, field.validation_alias):
            return str(field.validation_alias or field_name), field
    return first, None


def _bounds(field: FieldInfo | None) -> str:
    low = next((m.ge for m in field.metadata if isinstance(m, Ge)), None) if field else None
    high = next((m.le for m in field.metadata if isinstance(m, Le)), None) if field else None
    return f" ({low}..{high})" if low is not None and high is not None else ""


def _message(error: Mapping[str, Any], named: Mapping[str, str]) -> str:
    """One validation error, worded for the variable that holds the value."""
    loc = tuple(error["loc"])
    var, field = _field(loc)
    secret = field is not None and "SecretStr" in str(field.annotation)
    name = named.get(var, var)
    value = error["input"]
    kind = error["type"]
    if kind in _NUMBERS:
        return f"{name}={value!r} is not {_NUMBERS[kind]}{_bounds(field)}"
    if kind in _RANGES:
        number = float(value) if field is not None and field.annotation is float else int(value)
        return f"{name}={number} is out of range{_bounds(field)}"
    if kind == "missing" and var in _VALID:
        return f"{name} {_VALID[var]}"
    reason = (error.get("ctx") or {}).get("reason") if kind == "setting" else None
    if reason:
        return f"{name}: {reason}"
    valid = _VALID.get(var, "is not valid")
    if secret:
        return f"{name} {valid}"
    if isinstance(loc[-1], int):
        return f"{name} entry {value!r} {valid}"
    return f"{name}={value!r} {valid}"
