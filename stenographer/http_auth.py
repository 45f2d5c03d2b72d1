"""Who may call the HTTP server: the bind address rules and the bearer token.

A non-loopback bind address needs a configured token (STENO_HTTP_TOKEN or
STENO_HTTP_TOKEN_FILE) and both allowlists. On loopback the configured token, else
one generated on the first start into the owner-only file ``http_token`` in the data
directory and reused after it: every local user can reach a loopback port, and the
sync endpoint would hand any of them the whole record, past the store's 0600 mode.
``--no-token`` serves without one, on loopback only. Every refusal is an
``HttpConfigError`` (a ``SettingsError``: the CLI prints it and exits 2), raised before
anything is bound.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
import sys
from pathlib import Path

from stenographer.settings import MIN_TOKEN_CHARS, TOKEN_RE, Settings, SettingsError

__all__ = ["TOKEN_FILE", "HttpConfigError", "check_bind", "http_auth", "is_loopback",
           "say", "warn_readable"]

TOKEN_FILE = "http_token"  # the generated token, in the data directory


class HttpConfigError(SettingsError):
    """The HTTP server cannot start as configured (the CLI exits 2)."""


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def check_bind(settings: Settings, host: str) -> None:
    """Refuse a non-loopback bind address unless a token and both allowlists are set."""
    if is_loopback(host):
        return
    missing = [name for name, value in (
        ("a bearer token (STENO_HTTP_TOKEN or STENO_HTTP_TOKEN_FILE)", settings.http_token),
        ("STENO_ALLOWED_HOSTS (comma-separated host:port)", settings.allowed_hosts),
        ("STENO_ALLOWED_ORIGINS (comma-separated http(s)://host:port)",
         settings.allowed_origins),
    ) if not value]
    if missing:
        raise HttpConfigError(
            f"refusing to serve HTTP on {host}, which is reachable from other machines, "
            f"without {' and '.join(missing)}. Bind 127.0.0.1 (the default) or set them.")


def http_auth(settings: Settings, host: str, *, no_token: bool = False
              ) -> tuple[str | None, str]:
    """The bearer token a server on ``host`` requires (None: none), and a note that
    tells the operator where it is and how clients send it.

    The configured token, else the one in the data directory's ``http_token`` file
    (generated owner-only on first use). ``no_token`` serves without one: refused with
    a configured token (which would silently stop being checked) and off loopback."""
    if no_token:
        if settings.http_token is not None:
            raise HttpConfigError(
                "--no-token conflicts with the configured bearer token (STENO_HTTP_TOKEN "
                "or STENO_HTTP_TOKEN_FILE): unset it, or drop --no-token")
        if not is_loopback(host):
            raise HttpConfigError(
                f"--no-token is refused on {host}, which is reachable from other machines: "
                "it is for loopback addresses only (127.0.0.1, ::1, localhost)")
        return None, ("no token (--no-token): every user of this machine can call every "
                      "tool, forget included, and pull the whole record")
    check_bind(settings, host)
    if settings.http_token is not None:
        where = (f"the token in {settings.http_token_file}" if settings.http_token_file
                 else "STENO_HTTP_TOKEN")
        return settings.http_token.get_secret_value(), f"bearer token required: {where}"
    path = settings.data_dir / TOKEN_FILE
    created = _generate_token(path)
    token = _read_token(path)
    return token, (
        f"bearer token required: {'generated into' if created else 'read from'} {path} "
        f"(owner-only). Clients send the header \"Authorization: Bearer <token>\", e.g. "
        f"curl -H \"Authorization: Bearer $(cat {path})\"; a peer syncing with this "
        f"server sets STENO_SYNC_TOKEN_FILE={path}. Serving without a token: --no-token "
        "(loopback only)")


def _generate_token(path: Path) -> bool:
    """Create ``path`` (mode 0600) holding a new random token unless it exists; whether
    it was created. The file appears whole (written aside, then linked into place), so
    a server starting at the same moment reads the same token, never half of one."""
    if path.exists():
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        aside = path.with_name(f".{path.name}.{os.getpid()}.new")
        fd = os.open(aside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            os.write(fd, (secrets.token_hex(32) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(aside, path)
        except FileExistsError:
            return False
        finally:
            aside.unlink()
    except OSError as ex:
        raise HttpConfigError(
            f"cannot create the token file {path}: {ex.strerror or ex}. Set "
            "STENO_HTTP_TOKEN_FILE to a token file of your own, or serve with --no-token "
            "(loopback only)") from None
    return True


def _read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as ex:
        reason = ex.strerror if isinstance(ex, OSError) else "not ASCII text"
        raise HttpConfigError(f"cannot read the token file {path}: {reason}") from None
    if len(token) < MIN_TOKEN_CHARS or not TOKEN_RE.fullmatch(token):
        raise HttpConfigError(
            f"the token file {path} does not hold a valid token (at least "
            f"{MIN_TOKEN_CHARS} visible ASCII characters): delete it and a new one is "
            "generated at the next start")
    warn_readable(path)
    return token


def say(message: str) -> None:
    """A line for the operator on stderr."""
    print(f"stenographer: {message}", file=sys.stderr, flush=True)


def warn_readable(path: Path) -> None:
    """A line on stderr when a token file can be read by other users."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:  # read a moment ago; gone since: nothing to warn about now
        return
    if mode & 0o077:
        say(f"warning: the token file {path} can be read by other users "
            f"(mode {mode:04o}); run: chmod 600 {path}")
