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
  ``--token``, ``<password>``, ``the password is``): nodes.extract.secret_values decides
  from the name whether any literal value is a secret (password, secret, token,
  credential) or only a random-looking one (a bare ``key``), and rejects placeholders,
  references, numbers and paths. Quoted values may hold spaces; an unquoted value
  after ``password:`` that runs to the end of the line as a few plain words is a
  passphrase. After a name with no sign (``token abc...``, ``password is ...``) the
  value must look random.

Why matching stays linear on any input (a 1 MB single-line turn is accepted): provider
shapes are searched only inside runs of 20 or more non-space characters; every other
regex is anchored on a literal (``://``, ``Authorization``, a secret word found by
substring search) and its quantifiers are bounded and possessive. Private key blocks
are matched by ``str.find`` with one forward cursor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from nodes.extract.secret_shapes import SHAPE_KINDS, tokens_in
from nodes.extract.secret_values import (
    ANY_LITERAL,
    NOT_SECRET,
    literal_secret,
    looks_random,
    name_tier,
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

# A name, an optional closing quote or bracket, an optional type, then the sign (``=``,
# ``:``, ``:=``, ``::=``, ``?=``, ``.=``, ``=>``, a comparison, or a comma between two
# quoted arguments: setProperty("API_TOKEN", "...")); or, after a name that ends in a
# secret noun, white space or ``is``/``was`` before a value that could be random (a
# quote, or a digit or symbol in the next word), or any value after a ``--`` option.
# The value is read from where the match ends (_value); the name is judged by
# nodes.extract.secret_values.name_tier.
_NAME_OP = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<dash>--?)?(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,80}+)"
    r"(?P<noun>(?i:(?<=password)|(?<=passwd)|(?<=phrase)|(?<=pwd)|(?<=secret)|(?<=token)"
    r"|(?<=creds)|(?<=credential)|(?<=credentials)))?"
    r"(?P<closed>\\?[\"'`]\]?)?"
    # a typed declaration: var apiToken string = ..., secret: String = ...
    r"(?:(?:[ \t]{1,3}+|[ \t]{0,3}+:[ \t]{0,3}+)[A-Za-z_][A-Za-z0-9_.]{0,30}+(?:\[\])?"
    r"(?=[ \t]{0,3}+:?=(?!=)))?[ \t]{0,3}+"
    r"(?P<op>:{1,3}=|=>|===?|!==?|[?.]=|=|:(?![:/])|(?(closed),(?=[ \t]{0,3}+[\"'`])|(?!))"
    r"|(?(noun)(?<=[ \t])(?:(?:is|was)[ \t]{1,3}+)?"
    r"(?(dash)|(?=[\"'`]|[^\s\"'`]{0,64}?[0-9!@#$%^&*+=~?|:/]))|(?!)))[ \t]{0,3}+")
_XML_ELEMENT = re.compile(
    r"<(?P<name>[A-Za-z_][A-Za-z0-9_.:-]{0,63}+)>[ \t\r\n]{0,40}+(?P<secret>[^\s<>]{1,4096}+)"
    r"[ \t\r\n]{0,40}+</")
_KEY_VALUE_ATTRIBUTES = re.compile(
    r"(?i)key[ \t]{0,3}+=[ \t]{0,3}+\"(?P<name>[^\"<>]{1,64}+)\"[ \t]{1,3}+value[ \t]{0,3}+="
    r"[ \t]{0,3}+\"(?P<secret>[^\"<>]{1,256}+)\"")
MAX_VALUE = 4096  # a value as long as a base64 DER key is still read whole
# A bare value ends at white space, a quote, a delimiter or a backslash (an escaped
# line break inside a JSON string: "TOKEN=abc\\nNEXT=1").
_BARE = re.compile(r"[^\s'\"`,;<>(){}\[\]\\]{1,%d}+" % MAX_VALUE)  # noqa: UP031
_QUERY_NEXT = re.compile(r"&[A-Za-z_][A-Za-z0-9_.-]{0,40}+=")
# The rest of a line as a passphrase: two to eight plain words and nothing else.
_PHRASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]{0,30}+(?:[ ][A-Za-z0-9][A-Za-z0-9'-]{0,30}+)"
                     r"{1,7}+[ \t]{0,8}+(?=\r?\n|\Z)")
# What may follow a bare value that is the whole field: the end of the line, a comment,
# a delimiter (JSON, a call's arguments, a query string), a closing quote or tag.
_FIELD_END = re.compile(r"[ \t]{0,8}+(?:\r?\n|\Z|//|[#,;:)}\]&'\"`<|])")
# What may begin a configuration line before its name: indentation, a list dash,
# ``export`` or ``set``, a quote.
_LINE_LEAD = re.compile(r"[ \t]{0,40}+(?:(?:export|set|-)[ \t]{1,3}+)?[\"']?")
_LEAD_CHARS = 48
_FUNCTION_WORDS = frozenset(
    "a an the is are was were be been being to of in on at by for with from via into and "
    "or nor not no it its this that these those there here we you i he she they our your "
    "my me us them must should shall will would can could may might do does did has have "
    "had as if then than when where which who what how see ask use used set per least "
    "only all any each every more most less".split())
# Screening: an assignment can only be where one of these is (by substring search).
_ASSIGNMENT_WORDS = ("secret", "token", "pass", "pwd", "cred", "key", "auth", "sig=")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_REACH = 82  # a name's longest run before its secret word, dashes included
_QUOTES = "\"'`"


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


def _name_starts(text: str, lowered: str) -> Iterator[tuple[int, int]]:
    """(start of the name, position of its secret word) for each secret word found by
    substring search: the name is the identifier around the word. Each character is
    scanned back over once, so this stays linear on "passwordpassword..."."""
    hits: list[int] = []
    for word in _ASSIGNMENT_WORDS:  # str.find per word beats one regex alternation
        at = lowered.find(word)
        while at != -1:
            hits.append(at)
            at = lowered.find(word, at + len(word))
    hits.sort()
    prev_at, prev_start = -1, -1
    for at in hits:
        floor = max(0, at - _NAME_REACH)
        start = at
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
            if start == prev_at:  # the previous word's name runs on to this one
                start = max(prev_start, floor)
                break
        prev_at = at
        if start != prev_start:
            prev_start = start
            yield start, at


def _value(text: str, pos: int) -> tuple[int, int, bool] | None:
    """The value that starts at ``pos``: (start, end, quoted). A quoted one ends at its
    closing quote on the same line; a bare one at white space or a delimiter, and is
    code when a call, index or generic follows (``getpass()``, ``os.environ[...]``)."""
    quote = text[pos : pos + 1]
    if quote == "\\" and text[pos + 1 : pos + 2] in _QUOTES:
        quote = text[pos : pos + 2]
    if quote and quote[-1] in _QUOTES:
        start = pos + len(quote)
        close = text.find(quote, start, start + MAX_VALUE + 1)
        if close <= start or text.find("\n", start, close) != -1:
            return None
        if quote == "`" and text.find(" ", start, close) != -1:
            return None  # `etcdctl get /secret`: a shell command, not a literal
        return start, close, True
    bare = _BARE.match(text, pos)
    if bare is None or text[bare.end() : bare.end() + 1] in ("(", "[", "{", "<"):
        return None
    if text.find("&", pos, bare.end()) == -1:
        return pos, bare.end(), False
    query = _QUERY_NEXT.search(text, pos, bare.end())  # token=abc&user=x: stop at &
    return pos, query.start() if query is not None else bare.end(), False


def _line_start(text: str, m: re.Match[str]) -> bool:
    """Whether the name at ``m`` begins a configuration line (YAML, INI, .env)."""
    line = text.rfind("\n", max(0, m.start() - _LEAD_CHARS), m.start()) + 1
    if line == 0 and m.start() > _LEAD_CHARS:
        return False
    return _LINE_LEAD.fullmatch(text, line, m.start()) is not None


def _passphrase(text: str, start: int, line_start: bool) -> int | None:
    """Where a passphrase that starts at ``start`` ends: the rest of a configuration
    line (the name begins the line) made of two to eight plain words, none of them a
    function word ("password: correct horse battery staple", not "password: see the
    vault")."""
    if not line_start:
        return None
    phrase = _PHRASE.match(text, start)
    if phrase is None or not _FUNCTION_WORDS.isdisjoint(phrase.group().lower().split()):
        return None
    return start + len(phrase.group().rstrip())


def _assigned(text: str, m: re.Match[str]) -> tuple[Span | None, int]:
    """The value assigned at ``m`` if the name and the value say it is a secret, and
    where the value ends (a secret word inside it names nothing)."""
    name, op, dash, closed = m.group("name", "op", "dash", "closed")
    if text.endswith("[REDACTED:", 0, m.start("name")):
        return None, m.end()
    tier = name_tier(name)
    signed = op != "" and op[0] in "=:!?.,"
    if tier == NOT_SECRET or (tier != ANY_LITERAL and not signed):
        return None, m.end()  # "key 2026-01-05": only a password, secret or token states one
    found = _value(text, m.end())
    if found is None:
        return None, m.end()
    start, end, quoted = found
    examined = end
    if not quoted:
        end = start + len(text[start:end].rstrip(".:"))  # a sentence or a block ends
    value = text[start:end]
    if not value:
        return None, examined
    # NAME=value with nothing around the sign: the whole field, whatever follows.
    tight = op in ("=", ":=") and m.end() == m.end("op") and m.start("op") == m.end("name")
    if op == ",":  # ("API_TOKEN", "...") is also any list of strings: only a random one
        ok = looks_random(value)
    elif quoted:
        ok = literal_secret(value, quoted=True) if tier == ANY_LITERAL else looks_random(value)
    elif not signed:  # "token abc...", "password is ...", "--password VALUE"
        ok = literal_secret(value, quoted=True) if dash else looks_random(value)
    elif tier != ANY_LITERAL:
        ok = looks_random(value)
    elif op == ":" and not closed and not (line_start := _line_start(text, m)):
        ok = looks_random(value)  # "as a secret: nothing" is prose, not a mapping
    elif tight or _FIELD_END.match(text, end) is not None:
        ok = literal_secret(value, quoted=False)
    elif (phrase_end := _passphrase(text, start, line_start if op == ":" and not closed
                                    else _line_start(text, m))) is not None:
        return Span(start, phrase_end, "secret_assignment", _ASSIGN_RANK), phrase_end
    else:  # more follows on the line: only a random value is one
        ok = looks_random(value)
    return (Span(start, end, "secret_assignment", _ASSIGN_RANK) if ok else None), examined


def _element(m: re.Match[str]) -> bool:
    tier = name_tier(m.group("name"))
    if tier == ANY_LITERAL:
        return literal_secret(m.group("secret"), quoted=True)
    return tier != NOT_SECRET and looks_random(m.group("secret"))


def _assignments(text: str, lowered: str) -> list[Span]:
    spans: list[Span] = []
    examined = 0  # the end of the last value read
    for start, at in _name_starts(text, lowered):
        if at < examined:
            continue
        m = _NAME_OP.match(text, start)
        span: Span | None = None
        if m is not None and at < m.end("name"):
            span, examined = _assigned(text, m)
        elif text[start - 1 : start] == "<":  # <password>...</password>
            element = _XML_ELEMENT.match(text, start - 1)
            if element is not None and _element(element):
                span = Span(element.start("secret"), element.end("secret"),
                            "secret_assignment", _ASSIGN_RANK)
        elif text[start - 1 : start] == '"':  # <add key="Password" value="..." />
            found = _KEY_VALUE_ATTRIBUTES.search(text, max(0, start - 16), start + 400)
            if found is not None and _element(found):
                span = Span(found.start("secret"), found.end("secret"), "secret_assignment",
                            _ASSIGN_RANK)
        if span is not None:
            spans.append(span)
            examined = max(examined, span.end)
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
    spans += _assignments(text, lowered)
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


_MARKS = {kind: MARK.format(kind=kind) for kind in ("private_key", *SHAPE_KINDS)}
KINDS = ("private_key", *SHAPE_KINDS, "aws_secret_key", "aws_session_token", "url_password",
         "auth_header", "basic_auth", "secret_assignment", "custom")
