"""Credentials in free text, found without a model and replaced by ``[REDACTED:<kind>]``.

Every free text that is stored (a turn's content, a milestone label, a forget reason)
goes through :func:`redact` before it is hashed, stored or indexed. Three kinds of
detector, after the published rule sets of secret scanners (gitleaks, detect-secrets,
trufflehog):

* **shapes**: provider tokens by their prefix (``ghp_``, ``npm_``, ``AKIA`` ...; see
  nodes.extract.secret_shapes), JWTs, webhook URLs;
* **contexts** that say "a secret follows": a private key block, the password of a
  URL or of ``curl -u``, an ``Authorization``/``Bearer`` header, the 40-character
  secret written next to an AWS key id. Only the secret part is replaced, so
  ``postgres://app:[REDACTED:url_password]@db`` still tells where it pointed;
* **assignments** to a name that says secret (``DB_PASSWORD=``, ``"api_key": ``,
  ``--token``, ``<password>``, ``the password is``; nodes.extract.secret_assignments):
  a password, secret, token or credential name makes any literal a secret, a name that
  only says key or auth a random-looking one; placeholders, references, numbers and
  paths are not (nodes.extract.secret_values).

A value found as a secret is replaced wherever else it occurs in the text.

Why matching stays linear on any input (a 1 MB single-line turn is accepted): provider
shapes are searched only inside runs of 20 or more non-space characters; every other
regex is anchored on a literal (``://``, ``Authorization``, a secret word found by
substring search) and its quantifiers are bounded and possessive. Private key blocks
are matched by ``str.find`` with one forward cursor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from constants import compile_extra
from nodes.extract.secret_assignments import assignments
from nodes.extract.secret_shapes import SHAPE_KINDS, tokens_in
from nodes.extract.secret_values import (
    literal_secret,
    looks_random,
    placeholder,
)

__all__ = [
    "KINDS",
    "Redacted",
    "Span",
    "compile_extra",
    "find_secrets",
    "redact",
]

MARK = "[REDACTED:{kind}]"
MAX_PEM_CHARS = 20_000  # a 16k-bit RSA key in PEM is ~12 KB


@dataclass(frozen=True)
class Span:
    """A secret at ``text[start:end]``; ``rank`` breaks ties between detectors."""

    start: int
    end: int
    kind: str
    rank: int = 0


@dataclass(frozen=True)
class Redacted:
    text: str
    kinds: tuple[str, ...]  # one per replacement, in text order

    @property
    def count(self) -> int:
        return len(self.kinds)


# Ranks: a private key block first, then the shapes (their own ranks), then contexts.
_PEM_RANK, _CONTEXT_RANK = -1, 1000
(_URL_RANK, _HEADER_RANK, _BEARER_RANK, _ASSIGN_RANK, _AWS_PAIR_RANK, _CURL_RANK,
 _CUSTOM_RANK, _AGAIN_RANK) = range(_CONTEXT_RANK, _CONTEXT_RANK + 8)
_MIN_AGAIN = 8  # shorter values are too likely to occur by chance

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\r\n]{0,20000}+")
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/]+")
_PEM_MIN_BODY = 64  # gitleaks' rule: a block with less is an example, not a key

_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,19}+://[^\s:/@?#]{0,128}+:"
    r"(?P<secret>[^\s/@?#\"'<>]{1,256}+)@")
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization[\"']?[ \t]{0,3}+[:=][ \t]{0,3}+[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|apikey)[ \t]{1,3}+)?"
    r"(?P<secret>[A-Za-z0-9._~+/=-]{8,4096}+)")
_BEARER = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])bearer[ \t]{1,3}+(?P<secret>[A-Za-z0-9._~+/=-]{16,4096}+)"
    r"(?![A-Za-z0-9._~+/=-])")
# curl -u user:password; with no password, the user is the key (curl -u sk_live_...:).
_CURL_USER = re.compile(
    r"(?<![A-Za-z0-9_-])(?:-u|--user)(?:[ \t]{1,3}+|=)[\"']?(?P<user>[^\s:\"'\[\]]{0,128}+)"
    r"[\"']?:[\"']?(?P<password>[^\s\"'\[\]]{0,256}+)")
# The 40 base64 characters of an AWS secret access key (trufflehog's rule: near a key
# id, and more random than any hex digest can be).
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9+/=])(?:[A-Za-z0-9+/]{40}|[A-Za-z0-9+/]{100,4096}+={0,3})"
                         r"(?![A-Za-z0-9+/=])")
_AWS_PAIR_REACH = 300
_AWS_SECRET_ENTROPY = 4.25

def _private_keys(text: str) -> list[Span]:
    if "PRIVATE KEY" not in text:
        return []
    spans: list[Span] = []
    pos, end_at = 0, -2  # end_at: the next "-----END" at or after pos (-1: none left)
    while (m := _PEM_BEGIN.search(text, pos)) is not None:
        if end_at != -1 and end_at < m.end():
            end_at = text.find("-----END", m.end())
        if end_at != -1 and end_at - m.end() <= MAX_PEM_CHARS:
            close = text.find("-----", end_at + 8, end_at + 80)
            stop = close + 5 if close != -1 else end_at + 8
        else:  # no END marker: the header and the base64 lines after it
            body = _PEM_BODY.match(text, m.end())
            stop = body.end() if body is not None else m.end()
        if len(_NOT_BASE64.sub("", text[m.end() : stop])) >= _PEM_MIN_BODY:
            spans.append(Span(m.start(), stop, "private_key", _PEM_RANK))
        pos = stop
    return spans


def _shannon(value: str) -> float:
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in map(value.count, set(value)))


def _aws_pairs(text: str, key_ids: list[Span]) -> list[Span]:
    """Near an AWS key id (trufflehog's rule): the 40-character secret access key,
    whatever it holds (the documented example, with EXAMPLEKEY at its end, included),
    and a session token of 100 base64 characters or more; each more random than any
    hex digest can be."""
    windows: list[tuple[int, int]] = []
    for key in key_ids:  # in text order; overlapping reaches merged
        start, end = max(0, key.start - _AWS_PAIR_REACH), key.end + _AWS_PAIR_REACH
        if windows and start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    spans: list[Span] = []
    for start, end in windows:
        for m in _AWS_SECRET.finditer(text, start):  # a session token may run on past end
            if m.start() > end:
                break
            value = m.group()
            if len(value) != 40 and (len(value) < 100 or not value[:4].isalnum()):
                continue
            if (not value.isalnum() or (any(c.isupper() for c in value)
                                        and any(c.islower() for c in value))) \
                    and _shannon(value) >= _AWS_SECRET_ENTROPY:
                kind = "aws_secret_key" if len(value) == 40 else "aws_session_token"
                spans.append(Span(m.start(), m.end(), kind, _AWS_PAIR_RANK))
    return spans


def _group_spans(pattern: re.Pattern[str], text: str, kind: str, rank: int,
                 keep: Callable[[re.Match[str]], bool], start: int = 0,
                 end: int | None = None) -> list[Span]:
    matches = pattern.finditer(text, start, len(text) if end is None else end)
    return [Span(m.start("secret"), m.end("secret"), kind, rank) for m in matches if keep(m)]


def _not_placeholder(m: re.Match[str]) -> bool:
    return not placeholder(m.group("secret"))


def _auth_header(m: re.Match[str]) -> bool:
    """With a scheme (``Bearer``, ``Basic`` ...) any literal is a credential; without
    one ("authorization: required") the value must look random."""
    if m.group("scheme") is not None:
        return not placeholder(m.group("secret"))
    return looks_random(m.group("secret"))


def _bearer(m: re.Match[str]) -> bool:
    return looks_random(m.group("secret"))


def _curl_credentials(text: str) -> list[Span]:
    spans = []
    for m in _CURL_USER.finditer(text):
        if text.startswith("[", m.end()):
            continue  # -u user:[REDACTED:...]: done already
        group = "password" if m.group("password") else "user"
        if literal_secret(m.group(group), quoted=True):
            spans.append(Span(m.start(group), m.end(group), "basic_auth", _CURL_RANK))
    return spans


def find_secrets(text: str, extra: Sequence[re.Pattern[str]] = ()) -> list[Span]:
    """Secrets in ``text``, in text order, not overlapping (the earliest, then the
    longest, then the most specific detector wins)."""
    spans = _private_keys(text)
    tokens = [Span(t.start, t.end, t.kind, t.rank) for t in tokens_in(text)]
    spans += tokens
    if "://" in text and "@" in text:
        spans += _group_spans(_URL_PASSWORD, text, "url_password", _URL_RANK, _not_placeholder)
    lowered: str | None = None
    if "uthorization" in text or "UTHORIZATION" in text or "earer" in text or "EARER" in text:
        lowered = text.lower()
        if "authorization" in lowered:
            spans += _group_spans(_AUTH_HEADER, text, "auth_header", _HEADER_RANK, _auth_header)
        if "bearer" in lowered:
            spans += _group_spans(_BEARER, text, "auth_header", _BEARER_RANK, _bearer)
    lowered = lowered if lowered is not None else text.lower()
    spans += [Span(start, end, "secret_assignment", _ASSIGN_RANK)
              for start, end in assignments(text, lowered)]
    key_ids = [s for s in tokens if s.kind == "aws_access_key"]
    if key_ids:
        spans += _aws_pairs(text, key_ids)
    if "curl" in lowered and "-u" in text:
        spans += _curl_credentials(text)
    for pattern in extra:
        for m in pattern.finditer(text):
            start, end = (m.start(1), m.end(1)) if pattern.groups else (m.start(), m.end())
            if end > start >= 0:
                spans.append(Span(start, end, "custom", _CUSTOM_RANK))
    kept = _disjoint(spans)
    again = _again(text, kept)
    return kept if again is kept else _disjoint(again)


def _again(text: str, spans: list[Span]) -> list[Span]:
    """Every other place where a value found as a secret occurs in ``text`` is that
    secret too (``token = 'abc...' | 'abc...'``)."""
    extra: list[Span] = []
    starts = {s.start for s in spans}
    for value, kind in {text[s.start : s.end]: s.kind for s in spans
                        if s.end - s.start >= _MIN_AGAIN}.items():
        at = text.find(value)
        while at != -1:
            if at not in starts:
                extra.append(Span(at, at + len(value), kind, _AGAIN_RANK))
            at = text.find(value, at + len(value))
    return spans + extra if extra else spans


def _disjoint(spans: list[Span]) -> list[Span]:
    spans.sort(key=lambda s: (s.start, -s.end, s.rank))
    kept: list[Span] = []
    for span in spans:
        if not kept or span.start >= kept[-1].end:
            kept.append(span)
    return kept


def redact(text: str, extra: Sequence[re.Pattern[str]] = ()) -> Redacted:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
    spans = find_secrets(text, extra)
    if not spans:
        return Redacted(text, ())
    parts: list[str] = []
    pos = 0
    for span in spans:
        parts.append(text[pos : span.start])
        parts.append(_MARKS.get(span.kind) or MARK.format(kind=span.kind))
        pos = span.end
    parts.append(text[pos:])
    return Redacted("".join(parts), tuple(s.kind for s in spans))


_MARKS = {kind: MARK.format(kind=kind) for kind in ("private_key", *SHAPE_KINDS)}
KINDS = ("private_key", *SHAPE_KINDS, "aws_secret_key", "aws_session_token", "url_password",
         "auth_header", "basic_auth", "secret_assignment", "custom")
