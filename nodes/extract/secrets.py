"""Credentials in a turn, found without a model and replaced by ``[REDACTED:<kind>]``.

Issue #5 item 4: common credential shapes are redacted before a turn is hashed, stored
or indexed. Three kinds of detector:

* **shapes** with a fixed prefix (cloud keys, provider tokens, JWTs): one regex each;
* **contexts** that say "a secret follows" (a private key block, the password of a
  URL, an ``Authorization``/``Bearer`` header): only the secret part is replaced, so
  ``postgres://app:[REDACTED:url_password]@db`` still tells where it pointed;
* **assignments** to secret-like names (``*_SECRET``, ``*_TOKEN``, ``PASSWORD``,
  ``api_key`` ...) whose value looks random (letters with digits or symbols, not a
  placeholder such as ``${TOKEN}`` or ``<password>``, not a URL or a call).

Why matching stays linear on any input (a 1 MB single-line turn is accepted): every
shape starts only where its token starts (a look-behind on the token's own
characters), its quantifiers are bounded and possessive, and the token's characters
are those of the class that follows, so the runs that different starts scan do not
overlap. Private key blocks are matched by ``str.find`` with one forward cursor.
Detectors whose needle (a literal such as ``ghp_`` or ``://``) is absent are skipped
at the cost of one substring scan.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

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


# --- shapes: (kind, needles, regex) -----------------------------------------------------------

_SHAPES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("private_key", (), ""),  # placeholder for its rank; matched by _private_keys
    ("aws_access_key", ("AKIA", "ASIA", "ABIA", "ACCA"),
     r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
     r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,251}+(?![A-Za-z0-9_])"),
    ("github_token", ("github_pat_",),
     r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,244}+(?![A-Za-z0-9_])"),
    ("gitlab_token", ("glpat-",),
     r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,64}+(?![A-Za-z0-9_-])"),
    ("slack_token", ("xox",),
     r"(?<![A-Za-z0-9-])xox[abposre]-[A-Za-z0-9-]{10,250}+(?![A-Za-z0-9-])"),
    ("slack_webhook", ("hooks.slack.com",),
     r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,200}+"),
    ("stripe_key", ("_live_", "_test_"),
     r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,247}+(?![A-Za-z0-9_])"),
    ("anthropic_key", ("sk-ant-",),
     r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,300}+(?![A-Za-z0-9_-])"),
    ("openai_key", ("sk-",),
     r"(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9_-]{20,300}+(?![A-Za-z0-9_-])"),
    ("google_api_key", ("AIza",),
     r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
    ("npm_token", ("npm_",), r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"),
    ("pypi_token", ("pypi-",), r"(?<![A-Za-z0-9_-])pypi-[A-Za-z0-9_-]{50,300}+(?![A-Za-z0-9_-])"),
    ("huggingface_token", ("hf_",), r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34}(?![A-Za-z0-9_])"),
    ("jwt", ("eyJ",),
     r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,4096}+\.eyJ[A-Za-z0-9_-]{8,8192}+"
     r"\.[A-Za-z0-9_-]{8,2048}+(?![A-Za-z0-9_-])"),
)
# Shapes whose match must also look random: an English phrase after "sk-" or "xoxo-" is
# not a key. (AWS key ids are exempt: the documented example AKIA...EXAMPLE is a real
# shape that people paste, and redacting it costs nothing.)
_CHECK_RANDOM = frozenset({"openai_key", "anthropic_key", "pypi_token", "slack_token",
                           "github_token", "gitlab_token", "stripe_key", "npm_token",
                           "huggingface_token"})

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\r\n]{0,20000}+")

_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,19}+://[^\s:/@?#]{0,128}+:"
    r"(?P<secret>[^\s/@?#]{1,256}+)@")
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9-])(?:proxy-)?authorization[\"']?[ \t]{0,3}+[:=][ \t]{0,3}+[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|apikey)[ \t]{1,3}+)?"
    r"(?P<secret>[A-Za-z0-9._~+/=-]{8,4096}+)")
_BEARER = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])bearer[ \t]{1,3}+(?P<secret>[A-Za-z0-9._~+/=-]{16,4096}+)"
    r"(?![A-Za-z0-9._~+/=-])")
# An assignment: a name, an optional closing quote, `=`, `:`, `:=` or `=>`, an optional
# opening quote, and a value up to a delimiter (a value followed by `(`, `[`, `{` or `<`
# is code, not a literal).
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63}+)[\"']?[ \t]{0,3}+"
    r"(?::=|=>|=(?!=)|:(?![:/]))[ \t]{0,3}+[\"'`]?"
    r"(?P<secret>[^\s'\"`,;<>(){}\[\]]{8,256}+)(?![(<{\[])")
# Screening: an assignment detector only runs on a turn holding one of these.
_ASSIGNMENT_WORDS = ("secret", "token", "passw", "pwd", "passphrase", "credential", "key")
_SECRET_WORDS = ("secret", "passw", "pwd", "passphrase", "credential", "apikey", "api_key",
                 "api-key", "accesskey", "access_key", "privatekey", "private_key",
                 "accountkey", "account_key")
# Names that hold a count or a tool, not a token: max_tokens, tokenizer, token_type.
_NOT_A_TOKEN = re.compile(r"tokeni[sz]|tokens?_?(?:count|limit|usage|type|len|budget|id)\b"
                          r"|(?:max|num|total|input|output|prompt)_?tokens?")
_PLACEHOLDER_WORD = re.compile(
    r"(?i)redacted|example|placeholder|your[_-]|changeme|xxxx|\*\*\*|\.\.\.")
_PLACEHOLDER_VALUES = frozenset(
    "password passwd pass pw pwd secret token none null true false hidden masked dummy "
    "test undefined".split())
# "/" and "." are left out: "io.example/subscriptionId" is a name, not a secret.
_SYMBOLS = frozenset("!@#$%^&*+=~?|:")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS = frozenset("0123456789")


def _secret_name(name: str) -> bool:
    """``*_SECRET``, ``*_TOKEN``, ``PASSWORD``, ``api_key``, ``signingKey`` ..."""
    lower = name.lower()
    if any(word in lower for word in _SECRET_WORDS):
        return True
    if "token" in lower:
        return _NOT_A_TOKEN.search(lower) is None
    # "key" only as the name's last part: SIGNING_KEY, signingKey, key; not monkey.
    return lower == "key" or lower.endswith(("_key", "-key", ".key")) or name.endswith("Key")


def _placeholder(value: str) -> bool:
    return (value[:1] in ("$", "%", "<", "{") or value.lower() in _PLACEHOLDER_VALUES
            or _PLACEHOLDER_WORD.search(value) is not None or len(set(value)) < 3)


def _shannon(value: str, chars: set[str]) -> float:
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in map(value.count, chars))


@lru_cache(maxsize=4096)  # a turn repeating one value (a log) pays for it once
def _looks_random(value: str) -> bool:
    """A literal secret, not a word, identifier, placeholder, URL or version: letters
    with digits or symbols, varied enough (Shannon entropy of 2.5 bits a character)."""
    chars = set(value)
    if len(value) < 8 or len(chars) < 5 or value[0] in "/.~" or "://" in value:
        return False
    if chars.isdisjoint(_LETTERS) or (chars.isdisjoint(_DIGITS) and chars.isdisjoint(_SYMBOLS)):
        return False
    return not _placeholder(value) and _shannon(value, chars) >= 2.5


def _needed(text: str, needles: Sequence[str]) -> bool:
    return not needles or any(n in text for n in needles)


def _private_keys(text: str, rank: int) -> list[Span]:
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
        spans.append(Span(m.start(), stop, "private_key", rank))
        pos = stop
    return spans


def _assignment_windows(lowered: str) -> list[tuple[int, int]]:
    """Where an assignment to a secret-like name can be: around each secret word (found
    by substring search), as far as a name and a value reach; overlapping ones merged.
    Scanning only these keeps the assignment regex off the rest of a long turn."""
    reach_back, reach_on = 64, 64 + 16 + 256
    windows: list[tuple[int, int]] = []
    for word in _ASSIGNMENT_WORDS:
        at = lowered.find(word)
        while at != -1:
            windows.append((max(0, at - reach_back), at + reach_on))
            at = lowered.find(word, at + len(word))
    windows.sort()
    merged: list[tuple[int, int]] = []
    for start, end in windows:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _group_spans(pattern: re.Pattern[str], text: str, kind: str, rank: int,
                 keep: Callable[[re.Match[str]], bool]) -> list[Span]:
    return [Span(m.start("secret"), m.end("secret"), kind, rank)
            for m in pattern.finditer(text) if keep(m)]


def _not_placeholder(m: re.Match[str]) -> bool:
    return not _placeholder(m.group("secret"))


def _auth_header(m: re.Match[str]) -> bool:
    """With a scheme (``Bearer``, ``Basic`` ...) any literal is a credential; without
    one ("authorization: required") the value must look random."""
    if m.group("scheme") is not None:
        return not _placeholder(m.group("secret"))
    return _looks_random(m.group("secret"))


def _assignment(m: re.Match[str]) -> bool:
    return _secret_name(m.group("name")) and _looks_random(m.group("secret"))


def _bearer(m: re.Match[str]) -> bool:
    return _looks_random(m.group("secret"))


_COMPILED = tuple((kind, needles, re.compile(source) if source else None)
                  for kind, needles, source in _SHAPES)
# One pass over the turn finds whether any shape's needle is in it (most turns hold none).
_ANY_NEEDLE = re.compile("|".join(
    re.escape(n) for n in sorted({n for _, needles, _ in _SHAPES for n in needles}, key=len,
                                 reverse=True)) + "|PRIVATE KEY")


def find_secrets(text: str, extra: Sequence[re.Pattern[str]] = ()) -> list[Span]:
    """Secrets in ``text``, in text order, not overlapping (the earliest, then the
    longest, then the most specific detector wins)."""
    spans: list[Span] = []
    shapes = _COMPILED if _ANY_NEEDLE.search(text) is not None else ()
    for rank, (kind, needles, pattern) in enumerate(shapes):
        if pattern is None:
            spans.extend(_private_keys(text, rank))
        elif _needed(text, needles):
            for m in pattern.finditer(text):
                if kind not in _CHECK_RANDOM or _looks_random(m.group()):
                    spans.append(Span(m.start(), m.end(), kind, rank))
    rank = len(_COMPILED)
    if "://" in text and "@" in text:
        spans.extend(_group_spans(_URL_PASSWORD, text, "url_password", rank, _not_placeholder))
    lowered: str | None = None
    if "uthorization" in text or "UTHORIZATION" in text or "earer" in text or "EARER" in text:
        lowered = text.lower()
        if "authorization" in lowered:
            spans.extend(_group_spans(_AUTH_HEADER, text, "auth_header", rank + 1,
                                      _auth_header))
        if "bearer" in lowered:
            spans.extend(_group_spans(_BEARER, text, "auth_header", rank + 2, _bearer))
    if "=" in text or ":" in text:
        lowered = lowered if lowered is not None else text.lower()
        for start, end in _assignment_windows(lowered):
            spans.extend(Span(m.start("secret"), m.end("secret"), "secret_assignment", rank + 3)
                         for m in _ASSIGNMENT.finditer(text, start, end) if _assignment(m))
    for pattern in extra:
        for m in pattern.finditer(text):
            start, end = (m.start(1), m.end(1)) if pattern.groups else (m.start(), m.end())
            if end > start >= 0:
                spans.append(Span(start, end, "custom", rank + 4))
    return _disjoint(spans)


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
        parts.append(MARK.format(kind=span.kind))
        pos = span.end
    parts.append(text[pos:])
    return Redacted("".join(parts), tuple(s.kind for s in spans))


def compile_extra(sources: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    """Compile extra secret regexes (group 1, if any, is the part to replace).

    Raises ``ValueError`` naming the pattern when one does not compile or matches the
    empty string (it would redact nothing but cost a scan of every turn).
    """
    compiled = []
    for source in sources:
        try:
            pattern = re.compile(source)
        except re.error as exc:
            raise ValueError(f"invalid secret pattern {source!r}: {exc}; expected a Python "
                             "`re` regex") from exc
        if pattern.search("") is not None:
            raise ValueError(f"invalid secret pattern {source!r}: it matches the empty "
                             r"string; anchor it to a literal, e.g. acme_[0-9a-f]{32}")
        compiled.append(pattern)
    return tuple(compiled)


KINDS = (*dict.fromkeys(kind for kind, _, _ in _SHAPES), "url_password", "auth_header",
         "secret_assignment", "custom")
